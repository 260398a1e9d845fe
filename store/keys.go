package store

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unsafe"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPrefix is the root of Berth's keys when Config.Prefix is empty.
const DefaultPrefix = "/berth"

// keyspace builds the etcd keys under one prefix:
//
//	{prefix}/v1/budgets/{namespace}/{name}
//	{prefix}/v1/nodes/{name}
//	{prefix}/v1/pods/{namespace}/{name}
//
// Assumptions sort before budgets, budgets before nodes, nodes before pods,
// and nothing else (alloc/, replicas/, shards/) sorts between them, so one
// range watch covers exactly the objects a replica caches, in one global
// order.
type keyspace struct {
	alloc   string // "{prefix}/v1/alloc/"
	shards  string // "{prefix}/v1/shards/"
	replica string // "{prefix}/v1/replicas/"
	budgets string // "{prefix}/v1/budgets/"
	nodes   string // "{prefix}/v1/nodes/"
	pods    string // "{prefix}/v1/pods/"
	// groups sorts between nodes/ and pods/, so it is inside cachedRange;
	// assume/ sorts just before budgets/, where cachedRange starts.
	groups  string // "{prefix}/v1/podgroups/"
	assumes string // "{prefix}/v1/assume/"
	// nodeLeases sorts between budgets/ and nodes/, inside cachedRange:
	// see leases.go.
	nodeLeases string // "{prefix}/v1/nodeleases/"
	// uids indexes pods by uid (value: the pod's key) so that a uid a
	// client chose names one pod only; uids Berth assigns have no key here
	// (uid.go). It sorts after pods/, outside cachedRange.
	uids string // "{prefix}/v1/uids/"
}

func newKeyspace(prefix string) keyspace {
	prefix = strings.TrimRight(prefix, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return keyspace{
		alloc:   prefix + "/v1/alloc/",
		shards:  prefix + "/v1/shards/",
		replica: prefix + "/v1/replicas/",
		budgets: prefix + "/v1/budgets/",
		nodes:   prefix + "/v1/nodes/",
		pods:    prefix + "/v1/pods/",
		groups:  prefix + "/v1/podgroups/",
		assumes: prefix + "/v1/assume/",

		nodeLeases: prefix + "/v1/nodeleases/",
		uids:       prefix + "/v1/uids/",
	}
}

func (k *keyspace) node(name string) string { return k.nodes + name }

func (k *keyspace) allocation(node string) string { return k.alloc + node }

// shard is shard i's claim key, i in at least three digits so that the
// keys sort by shard. Every binding's fence names one, and fmt cost more
// than the rest of building it (and deepened the binding's stack: see
// appendPut).
func (k *keyspace) shard(i int) string {
	if i < 0 || i > 999 {
		return k.shardFormatted(i)
	}
	digits := [3]byte{byte('0' + i/100), byte('0' + i/10%10), byte('0' + i%10)}
	return k.shards + string(digits[:])
}

func (k *keyspace) shardFormatted(i int) string { return fmt.Sprintf("%s%03d", k.shards, i) }

func (k *keyspace) replicaKey(id string) string { return k.replica + id }

func (k *keyspace) pod(namespace, name string) string { return k.pods + namespace + "/" + name }

func (k *keyspace) uid(uid string) string { return k.uids + uid }

// podNamespace is the prefix of every pod key in one namespace.
func (k *keyspace) podNamespace(namespace string) string { return k.pods + namespace + "/" }

func (k *keyspace) budget(namespace, name string) string { return k.budgets + namespace + "/" + name }

// cachedRange is [start, end) holding every assumption, budget, node and
// pod key and nothing else.
func (k *keyspace) cachedRange() (start, end string) {
	return k.assumes, clientv3.GetPrefixRangeEnd(k.pods)
}

func (k *keyspace) isBudget(key string) bool { return strings.HasPrefix(key, k.budgets) }

// budgetName splits a budget key into namespace and name.
func (k *keyspace) budgetName(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(strings.TrimPrefix(key, k.budgets), "/")
	return namespace, name
}

// isNode and isPod tell what a key under cachedRange holds.
func (k *keyspace) isNode(key string) bool { return strings.HasPrefix(key, k.nodes) }
func (k *keyspace) isPod(key string) bool  { return strings.HasPrefix(key, k.pods) }

// nodeName returns the node name in a node key.
func (k *keyspace) nodeName(key string) string { return strings.TrimPrefix(key, k.nodes) }

// podName splits a pod key into namespace and name.
func (k *keyspace) podName(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(strings.TrimPrefix(key, k.pods), "/")
	return namespace, name
}

// validName rejects names that would break the key layout.
func validName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidArgument, what)
	}
	if strings.ContainsRune(name, '/') {
		return fmt.Errorf("%w: %s %q contains '/'", ErrInvalidArgument, what, name)
	}
	return nil
}

// encodePageToken makes the opaque continuation token for a list: the last
// key returned. The next page starts just after it.
func encodePageToken(lastKey string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(lastKey))
}

// decodePageToken returns the key the next page starts at (exclusive of the
// token's own key). The token must belong to the listed range.
func decodePageToken(token, rangePrefix string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || !strings.HasPrefix(string(b), rangePrefix) {
		return "", fmt.Errorf("%w: bad page token", ErrInvalidArgument)
	}
	return string(b) + "\x00", nil
}

// eventKey is a watched change's key as a string, without copying it: the
// watches convert every key they see, two watches see every pod write,
// and each copy was one more allocation per pod per watch. Nothing writes
// to an event's bytes once etcd delivers it (its value is already kept as
// a pod's record), so the string may be kept as long as any other.
func eventKey(ev *clientv3.Event) string {
	return unsafe.String(unsafe.SliceData(ev.Kv.Key), len(ev.Kv.Key))
}
