package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

const maxTopicNameLen = 249

// validTopicName applies Kafka's rules: 1-249 characters of [a-zA-Z0-9._-],
// not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > maxTopicNameLen {
		return fmt.Errorf("topic name %q: must be 1-%d characters and not \".\" or \"..\"", name, maxTopicNameLen)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("topic name %q: illegal character %q (legal: a-z A-Z 0-9 . _ -)", name, r)
		}
	}
	return nil
}

func newTopicID() string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(id[:])
}

// createTopic creates the topic key if absent and waits (bounded) until this
// broker's meta view has it, so requests right after see the topic.
func (b *Broker) createTopic(ctx context.Context, name string, partitions int32, configs map[string]string, validateOnly bool) (topicMeta, int16, error) {
	if err := validTopicName(name); err != nil {
		return topicMeta{}, kerr.InvalidTopicException.Code, err
	}
	if partitions == -1 {
		partitions = b.cfg.DefaultPartitions
	}
	if partitions <= 0 || partitions > layout.MaxPartitions {
		// Above the contract's bound every reader would skip the topic key.
		return topicMeta{}, kerr.InvalidPartitions.Code, fmt.Errorf("topic %s: %d partitions", name, partitions)
	}
	info := layout.TopicInfo{Name: name, ID: newTopicID(), Partitions: partitions, Configs: configs}
	t := topicMeta{info: info}
	id, _ := hex.DecodeString(info.ID)
	copy(t.id[:], id)
	if _, exists := b.meta.topic(name); exists {
		return t, kerr.TopicAlreadyExists.Code, fmt.Errorf("topic %s already exists", name)
	}
	if validateOnly {
		return t, 0, nil
	}
	key := b.cfg.Layout.TopicKey(name)
	resp, err := b.cfg.Etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, layout.Marshal(info))).
		Commit()
	if err != nil {
		return t, kerr.RequestTimedOut.Code, fmt.Errorf("create topic %s: %w", name, err)
	}
	if !resp.Succeeded {
		return t, kerr.TopicAlreadyExists.Code, fmt.Errorf("topic %s already exists", name)
	}
	t.rev = resp.Header.Revision
	b.log.Info("created topic", "topic", name, "partitions", partitions, "id", info.ID)
	b.awaitMeta(ctx, resp.Header.Revision)
	return t, 0, nil
}

// awaitMeta waits until the meta view is complete up to rev, at most 5s.
func (b *Broker) awaitMeta(ctx context.Context, rev int64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		ch, ok := b.meta.atLeast(rev)
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			b.log.Warn("meta view did not reach revision in time", "rev", rev)
			return
		}
	}
}

func (b *Broker) handleCreateTopics(ctx context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := make(map[string]int)
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		configs := make(map[string]string)
		for _, c := range rt.Configs {
			if c.Value != nil {
				configs[c.Name] = *c.Value
			}
		}
		var code int16
		var err error
		switch {
		case seen[rt.Topic] > 1:
			code, err = kerr.InvalidRequest.Code, fmt.Errorf("topic %s named more than once", rt.Topic)
		case len(rt.ReplicaAssignment) > 0:
			code, err = kerr.InvalidReplicaAssignment.Code, errors.New("manual replica assignment is not supported")
		default:
			var t topicMeta
			t, code, err = b.createTopic(ctx, rt.Topic, rt.NumPartitions, configs, req.ValidateOnly)
			if code == 0 {
				st.TopicID = t.id
				st.NumPartitions = t.info.Partitions
				st.ReplicationFactor = 1
				st.Configs = topicConfigsForCreate(b.topicConfigs(t.info))
			}
		}
		if code != 0 {
			st.ErrorCode = code
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func topicConfigsForCreate(cfgs map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(cfgs))
	for _, name := range slices.Sorted(maps.Keys(cfgs)) {
		v := cfgs[name]
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value = name, &v
		out = append(out, c)
	}
	return out
}

func (b *Broker) handleDeleteTopics(ctx context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	topics := req.Topics
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			topics = append(topics, kmsg.DeleteTopicsRequestTopic{Topic: &n})
		}
	}
	for _, rt := range topics {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t topicMeta
		var ok bool
		if rt.Topic != nil {
			t, ok = b.meta.topic(*rt.Topic)
		} else {
			t, ok = b.meta.topicByID(rt.TopicID)
		}
		if !ok {
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		name := t.info.Name
		st.Topic, st.TopicID = &name, t.id
		if err := b.deleteTopic(ctx, t); err != nil {
			b.log.Warn("delete topic", "topic", name, "err", err)
			st.ErrorCode = kerr.RequestTimedOut.Code
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// deleteTopic removes the topic key and every owner, epoch, state and
// segment key of the topic in one transaction (an owner's next commit is
// then refused); its objects are left to deleteTopicObjects.
func (b *Broker) deleteTopic(ctx context.Context, t topicMeta) error {
	l, name := b.cfg.Layout, t.info.Name
	key := l.TopicKey(name)
	resp, err := b.cfg.Etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", t.rev)).
		Then(clientv3.OpDelete(key),
			clientv3.OpDelete(l.MetaPrefix()+"owners/"+name+"/", clientv3.WithPrefix()),
			clientv3.OpDelete(l.MetaPrefix()+"epochs/"+name+"/", clientv3.WithPrefix()),
			clientv3.OpDelete(schema.New(l).LogPrefix()+name+"/", clientv3.WithPrefix()),
			clientv3.OpDelete(schema.New(l).TopicProducerPrefix(name), clientv3.WithPrefix())).
		Commit()
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("delete topic %s: topic changed concurrently", name)
	}
	b.log.Info("deleted topic", "topic", name)
	b.awaitMeta(ctx, resp.Header.Revision)
	b.deleteTopicObjects(name)
	return nil
}

func (b *Broker) handleCreatePartitions(ctx context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if code, err := b.growTopic(ctx, rt.Topic, rt.Count, req.ValidateOnly); code != 0 {
			st.ErrorCode = code
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// growTopic raises the partition count with a compare on the topic key.
func (b *Broker) growTopic(ctx context.Context, name string, count int32, validateOnly bool) (int16, error) {
	for attempt := 0; attempt < 5; attempt++ {
		key := b.cfg.Layout.TopicKey(name)
		got, err := b.cfg.Etcd.Get(ctx, key)
		if err != nil {
			return kerr.RequestTimedOut.Code, fmt.Errorf("read topic %s: %w", name, err)
		}
		if len(got.Kvs) == 0 {
			return kerr.UnknownTopicOrPartition.Code, fmt.Errorf("topic %s does not exist", name)
		}
		var info layout.TopicInfo
		if err := layout.Unmarshal(got.Kvs[0].Value, &info); err != nil {
			return kerr.UnknownServerError.Code, err
		}
		if count <= info.Partitions || count > layout.MaxPartitions {
			return kerr.InvalidPartitions.Code, fmt.Errorf("topic %s has %d partitions, cannot go to %d", name, info.Partitions, count)
		}
		if validateOnly {
			return 0, nil
		}
		info.Partitions = count
		resp, err := b.cfg.Etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", got.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, layout.Marshal(info))).
			Commit()
		if err != nil {
			return kerr.RequestTimedOut.Code, fmt.Errorf("grow topic %s: %w", name, err)
		}
		if resp.Succeeded {
			b.awaitMeta(ctx, resp.Header.Revision)
			return 0, nil
		}
	}
	return kerr.ReassignmentInProgress.Code, fmt.Errorf("topic %s changed concurrently, try again", name)
}

// topicConfigs are the topic's effective configs: stored ones over defaults.
func (b *Broker) topicConfigs(info layout.TopicInfo) map[string]string {
	cfgs := map[string]string{
		"cleanup.policy":         "delete",
		"compression.type":       "producer",
		"max.message.bytes":      strconv.Itoa(int(b.cfg.MaxFrameBytes)),
		"message.timestamp.type": "CreateTime",
		"min.insync.replicas":    "1",
		"retention.bytes":        "-1",
		"retention.ms":           "604800000",
		"segment.bytes":          "1073741824",
	}
	maps.Copy(cfgs, info.Configs)
	return cfgs
}

func (b *Broker) handleDescribeConfigs(_ context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		rs := kmsg.NewDescribeConfigsResponseResource()
		rs.ResourceType, rs.ResourceName = rr.ResourceType, rr.ResourceName
		var cfgs, stored map[string]string
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t, ok := b.meta.topic(rr.ResourceName)
			if !ok {
				rs.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Resources = append(resp.Resources, rs)
				continue
			}
			cfgs, stored = b.topicConfigs(t.info), t.info.Configs
		case kmsg.ConfigResourceTypeBroker:
			cfgs = map[string]string{
				"broker.id":                  itoa(b.cfg.ID),
				"auto.create.topics.enable":  strconv.FormatBool(b.cfg.AutoCreateTopics),
				"num.partitions":             itoa(b.cfg.DefaultPartitions),
				"message.max.bytes":          strconv.Itoa(int(b.cfg.MaxFrameBytes)),
				"default.replication.factor": "1",
			}
		default:
			rs.ErrorCode = kerr.InvalidRequest.Code
			resp.Resources = append(resp.Resources, rs)
			continue
		}
		rs.Configs = describeConfigs(cfgs, stored, rr.ConfigNames)
		resp.Resources = append(resp.Resources, rs)
	}
	return resp
}

func describeConfigs(cfgs, stored map[string]string, names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	if names == nil {
		names = slices.Sorted(maps.Keys(cfgs))
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range names {
		v, ok := cfgs[name]
		if !ok {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.ReadOnly = name, &v, true
		_, set := stored[name]
		c.IsDefault = !set
		c.Source = kmsg.ConfigSourceDefaultConfig
		if set {
			c.Source = kmsg.ConfigSourceDynamicTopicConfig
		}
		c.ConfigType = kmsg.ConfigTypeString
		out = append(out, c)
	}
	return out
}
