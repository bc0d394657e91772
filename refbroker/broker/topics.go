package broker

import "github.com/kproxy/kproxy/refbroker/broker/group"

// topicIDs adapts the meta view for the group coordinator.
type topicIDs struct{ m *metaView }

func (t topicIDs) Name(id [16]byte) (string, bool) {
	tm, ok := t.m.topicByID(id)
	return tm.info.Name, ok
}

func (t topicIDs) ID(name string) ([16]byte, bool) {
	tm, ok := t.m.topic(name)
	return tm.id, ok
}

func (b *Broker) topicResolver() group.Topics { return topicIDs{b.meta} }
