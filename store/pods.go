package store

import (
	"context"
	"fmt"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// CreateResult is the outcome of creating one pod.
type CreateResult struct {
	// Pod is the pod as stored: the new one, or for an identical resubmission
	// the one stored earlier.
	Pod *berthv1.Pod
	// Revision is the pod's create revision.
	Revision int64
	// Err is nil, ErrAlreadyExists (a different pod has the name),
	// ErrInvalidArgument, ErrUnavailable or ErrClosed.
	//
	// A uid another pod has is refused with a *UIDTakenError, and so is a
	// uid of the form Berth assigns (uid.go) made for another pod.
	Err error
}

// PodUpdate is a new value for a pod, derived from the value the writer read
// at ExpectedModRevision.
type PodUpdate struct {
	Pod                 *berthv1.Pod
	ExpectedModRevision int64
	// Value, if set, is the new value already encoded (as by
	// MarkUnschedulableValue); Pod then only names the pod.
	Value []byte
}

// UpdateResult is the outcome of one PodUpdate.
type UpdateResult struct {
	// Revision is the revision that wrote the update.
	Revision int64
	// Err is nil, ErrConflict (the pod changed or was deleted since it was
	// read), ErrInvalidArgument, ErrUnavailable or ErrClosed.
	Err error
}

// PodFilter selects pods in ListPods; zero fields match everything.
type PodFilter struct {
	Namespace string
	Phase     berthv1.PodPhase
	NodeName  string
}

func (f PodFilter) matches(p *berthv1.Pod) bool {
	if f.Phase != berthv1.PodPhase_POD_PHASE_UNSPECIFIED && p.GetStatus().GetPhase() != f.Phase {
		return false
	}
	return f.NodeName == "" || p.NodeName == f.NodeName
}

// PodRecord is a pod with the revision that last wrote it.
type PodRecord struct {
	Pod         *berthv1.Pod
	ModRevision int64
	// Value is Pod encoded, as stored, when the record was read from etcd
	// (nil otherwise). It is etcd's own copy, handed over: a handler may
	// keep it, in place of Pod, as a compact record of the pod, and must
	// not change it.
	Value []byte
}

func decodePod(b []byte) (*berthv1.Pod, error) {
	p := &berthv1.Pod{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("store: decode pod: %w", err)
	}
	return p, nil
}

func validatePodKey(p *berthv1.Pod) error {
	if p == nil {
		return fmt.Errorf("%w: nil pod", ErrInvalidArgument)
	}
	if err := validName("pod namespace", p.Namespace); err != nil {
		return err
	}
	return validName("pod name", p.Name)
}

// CreatePods stores new pods, all group committed together with other
// writers'. It does not modify the pods passed in. Missing fields are filled
// in the stored copy: a uid (uid.go) when empty, and phase PENDING, or BOUND
// when node_name is set, when the status has no phase.
//
// Per pod, in order: the pod is created (Revision is its create revision);
// or a pod with the same name exists and is identical (same spec ignoring
// status, ignoring uid when the request's uid is empty and node_name when the
// request's node_name is empty), and the STORED pod and its create revision
// are returned; or it differs, and Err is ErrAlreadyExists. Two concurrent
// submissions of one new pod: exactly one creates it.
func (s *Store) CreatePods(ctx context.Context, pods []*berthv1.Pod) []CreateResult {
	out := make([]CreateResult, len(pods))
	stored := make([]*berthv1.Pod, len(pods)) // the value written per pod
	var elsewhere []int                       // refused: a uid Berth made for another pod
	s.commitBatch(ctx, "create pod", len(pods), func(i int) (*commitUnit, error) {
		p := pods[i]
		if err := validatePodKey(p); err != nil {
			return nil, err
		}
		sp := withCreateDefaults(p)
		val, err := marshalPod(sp)
		if err != nil {
			return nil, fmt.Errorf("store: encode pod: %w", err)
		}
		key := s.keys.pod(p.Namespace, p.Name)
		stored[i] = sp
		u := &commitUnit{
			cmps:       []clientv3.Cmp{createRevIs(key, 0)},
			ops:        []*pb.RequestOp{putOp(key, val)},
			readValues: true, // to tell an identical resubmission from a rival
		}
		switch classifyUID(sp.Uid, p.Namespace, p.Name) {
		case uidBound:
			// Only this pod key can carry the uid, and the key's create
			// compare lets one pod have it at a time.
		case uidBoundElsewhere:
			elsewhere = append(elsewhere, i)
			return nil, &UIDTakenError{UID: sp.Uid}
		default:
			// A client's own uid: its index key is claimed in the same
			// unit as the pod, so a uid names one pod at most; it is one
			// more distinct key per unit, which keeps pods of one batch in
			// one Txn.
			uidKey := s.keys.uid(sp.Uid)
			u.cmps = append(u.cmps, createRevIs(uidKey, 0))
			u.ops = append(u.ops, putString(uidKey, key))
		}
		if chargesOnCreate(sp) {
			// Declared running: its node's allocation moves, so decisions
			// that did not see it cannot land there.
			u.charges = []allocCharge{{key: s.keys.allocation(sp.NodeName)}}
		}
		return u, nil
	}, func(i int, u *commitUnit, res commitResult) {
		switch res.err {
		case nil:
			out[i] = CreateResult{Pod: stored[i], Revision: res.rev}
		case errCompareFailed:
			if kv := u.currentKV(s.keys.pod(pods[i].Namespace, pods[i].Name)); kv != nil {
				out[i] = s.existingPod(pods[i], kv)
				break
			}
			// The name is free, so the uid is what is taken.
			holder := ""
			if kv := u.currentKV(s.keys.uid(stored[i].Uid)); kv != nil {
				holder = strings.TrimPrefix(string(kv.Value), s.keys.pods)
			}
			out[i].Err = &UIDTakenError{UID: stored[i].Uid, Holder: holder}
		default:
			out[i].Err = res.err
		}
	})
	for _, i := range elsewhere {
		// A pod stored before uids were bound to names (its uid a client's
		// version-8 UUID, claimed through the index) is still the same pod
		// when resubmitted: idempotent, like any other.
		kv, err := s.getKV(ctx, "create pod", s.keys.pod(pods[i].Namespace, pods[i].Name))
		if err != nil {
			out[i].Err = err // not known to be taken: let the client retry
			continue
		}
		if kv == nil {
			continue
		}
		if r := s.existingPod(pods[i], kv); r.Err == nil {
			out[i] = r
		}
	}
	return out
}

// UIDTakenError is the refusal of a pod whose uid another pod (Holder,
// "namespace/name") already has. errors.Is(err, ErrAlreadyExists) holds.
//
// Holder is empty when the uid is in the form of the uids Berth assigns
// (uid.go) but was not made for this pod: such a uid names its pod only by
// a hash, so which pod that is, or whether it still exists, is not known.
type UIDTakenError struct {
	UID    string
	Holder string
}

func (e *UIDTakenError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("store: already exists: uid %q %s", e.UID, UIDAssignedElsewhere)
	}
	return fmt.Sprintf("store: already exists: uid %q is the uid of pod %s", e.UID, e.Holder)
}

// UIDAssignedElsewhere says why a uid of Berth's form is refused for a pod
// it was not made for (a UIDTakenError with no Holder).
const UIDAssignedElsewhere = "is a uid Berth assigned to another pod (a version-8 UUID names the one pod it was made for)"

// Is makes errors.Is(err, ErrAlreadyExists) true.
func (e *UIDTakenError) Is(target error) bool { return target == ErrAlreadyExists }

// existingPod decides a create that found the name taken.
func (s *Store) existingPod(req *berthv1.Pod, kv *mvccpb.KeyValue) CreateResult {
	if kv == nil {
		// The key was present when compared and absent when read: both happen
		// at one revision, so this cannot occur; be safe anyway.
		return CreateResult{Err: fmt.Errorf("%w: pod %s/%s changed during create", ErrConflict, req.Namespace, req.Name)}
	}
	existing, err := decodePod(kv.Value)
	if err != nil {
		return CreateResult{Err: err}
	}
	if !sameSpec(req, existing) {
		return CreateResult{Err: fmt.Errorf("%w: pod %s/%s", ErrAlreadyExists, req.Namespace, req.Name)}
	}
	return CreateResult{Pod: existing, Revision: kv.CreateRevision}
}

// sameSpec tells whether a resubmitted pod matches the stored one: status is
// ignored, and so are uid and node_name when the request leaves them empty.
func sameSpec(req, stored *berthv1.Pod) bool {
	a, b := shallowCopy(req), shallowCopy(stored) // only whole fields change
	a.Status, b.Status = nil, nil
	if a.Uid == "" {
		b.Uid = ""
	}
	if a.NodeName == "" {
		b.NodeName = ""
	}
	return proto.Equal(a, b)
}

// DeletePod removes a pod. uid "" deletes whatever pod has the name;
// otherwise the stored pod's uid must equal it, else ErrConflict (a newer
// incarnation took the name). ErrNotFound if there is no such pod.
func (s *Store) DeletePod(ctx context.Context, namespace, name, uid string) (int64, error) {
	if err := validatePodKey(&berthv1.Pod{Namespace: namespace, Name: name}); err != nil {
		return 0, err
	}
	key := s.keys.pod(namespace, name)
	kv, err := s.getKV(ctx, "delete pod", key)
	if err != nil {
		return 0, err
	}
	// Compare-and-delete on the mod revision read; a change in between is
	// seen in the failed Txn's read, and judged again.
	const attempts = 8
	for range attempts {
		if kv == nil {
			return 0, fmt.Errorf("%w: pod %s/%s", ErrNotFound, namespace, name)
		}
		p, err := decodePod(kv.Value)
		if err != nil {
			return 0, err
		}
		if uid != "" && p.Uid != uid {
			return 0, fmt.Errorf("%w: pod %s/%s has uid %s, not %s", ErrConflict, namespace, name, p.Uid, uid)
		}
		// The pod's uid index key goes with it, freeing the uid. A uid
		// Berth assigns has none (uid.go), but a pod stored before that
		// has one whatever its uid's form: always delete it.
		u := &commitUnit{
			cmps:       []clientv3.Cmp{modRevIs(key, kv.ModRevision)},
			ops:        []*pb.RequestOp{deleteOp(key), deleteOp(s.keys.uid(p.Uid))},
			readValues: true, // to check the new value's uid
		}
		res, err := s.commitOne(ctx, "delete pod", u)
		if err != nil {
			return 0, err
		}
		if res.err == nil {
			return res.rev, nil
		}
		kv = u.currentKV(key)
	}
	return 0, fmt.Errorf("%w: pod %s/%s keeps changing", ErrConflict, namespace, name)
}

// GetPod reads one pod and the revision that last wrote it; ErrNotFound if
// it does not exist.
func (s *Store) GetPod(ctx context.Context, namespace, name string) (*berthv1.Pod, int64, error) {
	if err := validatePodKey(&berthv1.Pod{Namespace: namespace, Name: name}); err != nil {
		return nil, 0, err
	}
	kv, err := s.getKV(ctx, "get pod", s.keys.pod(namespace, name))
	if err != nil {
		return nil, 0, err
	}
	if kv == nil {
		return nil, 0, fmt.Errorf("%w: pod %s/%s", ErrNotFound, namespace, name)
	}
	p, err := decodePod(kv.Value)
	if err != nil {
		return nil, 0, err
	}
	return p, kv.ModRevision, nil
}

func (s *Store) getKV(ctx context.Context, op, key string) (*mvccpb.KeyValue, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Get(cctx, key)
	if err != nil {
		return nil, s.callError(ctx, op, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0], nil
}

// ListPods returns up to pageSize pods matching f in namespace/name order,
// starting after pageToken (empty for the first page), and the token of the
// next page (empty when no key is left). Filters apply while scanning: the
// range is read in chunks, all at the first chunk's revision, until the page
// is full or the keys end; a page may hold fewer pods than pageSize (even
// none) only when it is the last.
func (s *Store) ListPods(ctx context.Context, f PodFilter, pageSize int, pageToken string) ([]*berthv1.Pod, string, error) {
	pageSize = pageSizeOrDefault(pageSize)
	rangePrefix := s.keys.pods
	if f.Namespace != "" {
		if err := validName("pod namespace", f.Namespace); err != nil {
			return nil, "", err
		}
		rangePrefix = s.keys.podNamespace(f.Namespace)
	}
	start := rangePrefix
	if pageToken != "" {
		var err error
		if start, err = decodePageToken(pageToken, rangePrefix); err != nil {
			return nil, "", err
		}
	}
	end := clientv3.GetPrefixRangeEnd(rangePrefix)
	chunk := pageSize
	if f.Phase != berthv1.PodPhase_POD_PHASE_UNSPECIFIED || f.NodeName != "" {
		chunk = max(pageSize, s.chunk)
	}

	cctx, cancel := s.bound(ctx)
	defer cancel()
	var pods []*berthv1.Pod
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(chunk))}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.client.Get(cctx, start, opts...)
		if err != nil {
			return nil, "", s.callError(ctx, "list pods", err)
		}
		rev = resp.Header.Revision
		for i, kv := range resp.Kvs {
			p, err := decodePod(kv.Value)
			if err != nil {
				return nil, "", err
			}
			if !f.matches(p) {
				continue
			}
			pods = append(pods, p)
			if len(pods) == pageSize {
				next := ""
				if i < len(resp.Kvs)-1 || resp.More {
					next = encodePageToken(string(kv.Key))
				}
				return pods, next, nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return pods, "", nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// UpdatePods writes new pod values, each only if the pod's mod revision
// still equals its ExpectedModRevision (an ExpectedModRevision of 0 means the
// pod must not exist). The updates are group committed, many in one Txn;
// each succeeds or fails on its own.
func (s *Store) UpdatePods(ctx context.Context, updates []PodUpdate) []UpdateResult {
	out := make([]UpdateResult, len(updates))
	s.commitBatch(ctx, "update pod", len(updates), func(i int) (*commitUnit, error) {
		up := updates[i]
		if err := validatePodKey(up.Pod); err != nil {
			return nil, err
		}
		val := up.Value
		if val == nil {
			var err error
			if val, err = marshalPod(up.Pod); err != nil {
				return nil, fmt.Errorf("store: encode pod: %w", err)
			}
		}
		key := s.keys.pod(up.Pod.Namespace, up.Pod.Name)
		return &commitUnit{
			cmps: []clientv3.Cmp{modRevIs(key, up.ExpectedModRevision)},
			ops:  []*pb.RequestOp{putOp(key, val)},
		}, nil
	}, func(i int, _ *commitUnit, res commitResult) {
		switch res.err {
		case nil:
			out[i].Revision = res.rev
		case errCompareFailed:
			p := updates[i].Pod
			out[i].Err = fmt.Errorf("%w: pod %s/%s changed since revision %d", ErrConflict, p.Namespace, p.Name, updates[i].ExpectedModRevision)
		default:
			out[i].Err = res.err
		}
	})
	return out
}
