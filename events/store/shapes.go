package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// ShapesBucket is the key-value bucket where each partition's consumer
// shape is claimed (key "p<N>", see ClaimPartitionShape).
const ShapesBucket = "PRUNESCHED_SHAPES"

// ClaimPartitionShape returns the consumer shape of partition part (what
// a worker calls the set of durables that consume its facts), claiming
// it first when no process has: propose gives the shape to claim, and the
// claim is a key-value create, a publish the stream accepts only while
// the partition's key has no value, so of the processes claiming at once
// exactly one wins and every other reads the winner's shape. Without it,
// two processes choosing a shape by looking for each other's durables
// could both look before either created one, and both consume. The
// partition's key is read at the bucket's stream leader (a replica
// behind it would miss a claim just made). The bucket is created on first
// use (with Config.Replicas).
func (s *Store) ClaimPartitionShape(ctx context.Context, part int, propose func(ctx context.Context) (string, error)) (string, error) {
	key := "p" + strconv.Itoa(part)
	shape, err := s.partitionShape(ctx, key)
	if err != nil || shape != "" {
		return shape, err
	}
	want, err := propose(ctx)
	if err != nil {
		return "", err
	}
	if want == "" {
		return "", fmt.Errorf("claim shape of partition %d: empty shape", part)
	}
	kv, err := s.shapes(ctx)
	if err != nil {
		return "", fmt.Errorf("claim shape of partition %d: %w", part, err)
	}
	if _, err := kv.Create(ctx, key, []byte(want)); err == nil {
		return want, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", fmt.Errorf("claim shape of partition %d: %w", part, err)
	}
	shape, err = s.partitionShape(ctx, key)
	if err == nil && shape == "" {
		err = fmt.Errorf("claim shape of partition %d: claimed, but the leader has no value", part)
	}
	return shape, err
}

// partitionShape reads the shape claimed under key at the bucket's stream
// leader ("" when none is).
func (s *Store) partitionShape(ctx context.Context, key string) (string, error) {
	_, data, err := s.lastAtLeader(ctx, "KV_"+ShapesBucket, "$KV."+ShapesBucket+"."+key, true)
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return "", nil // nothing claimed (a deleted key reads empty too)
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamNotFound:
		return "", nil // no bucket yet: nothing claimed
	case err != nil:
		return "", fmt.Errorf("read shape %s: %w", key, err)
	}
	return string(data), nil
}

// shapes returns the shapes bucket, creating it when missing.
func (s *Store) shapes(ctx context.Context) (jetstream.KeyValue, error) {
	s.shapesMu.Lock()
	defer s.shapesMu.Unlock()
	if s.shapesKV != nil {
		return s.shapesKV, nil
	}
	kv, err := ensureKeyValue(ctx, s.js, jetstream.KeyValueConfig{
		Bucket:      ShapesBucket,
		Description: "prunesched: the consumer shape claimed for each partition",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
	})
	if err != nil {
		return nil, err
	}
	s.shapesKV = kv
	return kv, nil
}

// ensureKeyValue returns the key-value bucket cfg names, creating it with
// cfg when it does not exist; when another process creates it meanwhile
// (the create then fails on a configuration that differs), it looks the
// bucket up again. (proxy.JoinFleet opens its bucket the same way; the
// proxy may not import the store.)
func ensureKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("key-value bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}
