package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// DefaultScheduleTimeout is a pod group's schedule_timeout when unset.
const DefaultScheduleTimeout = 60 * time.Second

// maxPodGroups bounds ListPodGroups: every replica holds all groups in
// memory anyway.
const maxPodGroups = 100000

func (k *keyspace) group(namespace, name string) string { return k.groups + namespace + "/" + name }

func (k *keyspace) isGroup(key string) bool { return strings.HasPrefix(key, k.groups) }

// groupName splits a pod group key into namespace and name.
func (k *keyspace) groupName(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(strings.TrimPrefix(key, k.groups), "/")
	return namespace, name
}

func validatePodGroup(g *berthv1.PodGroup) error {
	if g == nil {
		return fmt.Errorf("%w: nil pod group", ErrInvalidArgument)
	}
	if err := validName("pod group namespace", g.Namespace); err != nil {
		return err
	}
	if err := validName("pod group name", g.Name); err != nil {
		return err
	}
	if g.MinMember < 1 {
		return fmt.Errorf("%w: pod group %s/%s: min_member %d < 1", ErrInvalidArgument, g.Namespace, g.Name, g.MinMember)
	}
	if t := g.GetScheduleTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() < 0 {
			return fmt.Errorf("%w: pod group %s/%s: schedule_timeout must be a non-negative duration", ErrInvalidArgument, g.Namespace, g.Name)
		}
	}
	return nil
}

// withGroupDefaults returns g, or a copy with schedule_timeout filled in,
// so every reader sees the timeout in force.
func withGroupDefaults(g *berthv1.PodGroup) *berthv1.PodGroup {
	if g.ScheduleTimeout != nil {
		return g
	}
	c := proto.Clone(g).(*berthv1.PodGroup)
	c.ScheduleTimeout = durationpb.New(DefaultScheduleTimeout)
	return c
}

// PutPodGroup creates or replaces a pod group and returns it as stored
// (schedule_timeout defaulted) with the revision of the write.
func (s *Store) PutPodGroup(ctx context.Context, g *berthv1.PodGroup) (*berthv1.PodGroup, int64, error) {
	if err := validatePodGroup(g); err != nil {
		return nil, 0, err
	}
	g = withGroupDefaults(g)
	val, err := marshalOpts.Marshal(g)
	if err != nil {
		return nil, 0, fmt.Errorf("store: encode pod group: %w", err)
	}
	u := &commitUnit{ops: []*pb.RequestOp{putOp(s.keys.group(g.Namespace, g.Name), val)}}
	res, err := s.commitOne(ctx, "put pod group", u)
	if err != nil {
		return nil, 0, err
	}
	return g, res.rev, nil
}

// DeletePodGroup removes a pod group; ErrNotFound if absent. Its members
// are left alone: pending ones wait until the group exists again.
func (s *Store) DeletePodGroup(ctx context.Context, namespace, name string) (int64, error) {
	if err := validatePodGroup(&berthv1.PodGroup{Namespace: namespace, Name: name, MinMember: 1}); err != nil {
		return 0, err
	}
	key := s.keys.group(namespace, name)
	u := &commitUnit{
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0)},
		ops:  []*pb.RequestOp{deleteOp(key)},
	}
	res, err := s.commitOne(ctx, "delete pod group", u)
	if err != nil {
		return 0, err
	}
	if res.err == errCompareFailed {
		return 0, fmt.Errorf("%w: pod group %s/%s", ErrNotFound, namespace, name)
	}
	return res.rev, nil
}

// GetPodGroup reads one pod group; ErrNotFound if absent.
func (s *Store) GetPodGroup(ctx context.Context, namespace, name string) (*berthv1.PodGroup, error) {
	if err := validatePodGroup(&berthv1.PodGroup{Namespace: namespace, Name: name, MinMember: 1}); err != nil {
		return nil, err
	}
	kv, err := s.getKV(ctx, "get pod group", s.keys.group(namespace, name))
	if err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, fmt.Errorf("%w: pod group %s/%s", ErrNotFound, namespace, name)
	}
	return decodePodGroup(kv.Value)
}

// ListPodGroups returns every pod group, or those of one namespace, in
// namespace/name order.
func (s *Store) ListPodGroups(ctx context.Context, namespace string) ([]*berthv1.PodGroup, error) {
	prefix := s.keys.groups
	if namespace != "" {
		if err := validName("pod group namespace", namespace); err != nil {
			return nil, err
		}
		prefix += namespace + "/"
	}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Get(cctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(maxPodGroups))
	if err != nil {
		return nil, s.callError(ctx, "list pod groups", err)
	}
	out := make([]*berthv1.PodGroup, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		g, err := decodePodGroup(kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func decodePodGroup(b []byte) (*berthv1.PodGroup, error) {
	g := &berthv1.PodGroup{}
	if err := proto.Unmarshal(b, g); err != nil {
		return nil, fmt.Errorf("store: decode pod group: %w", err)
	}
	return g, nil
}
