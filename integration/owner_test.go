package integration

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
)

func readOwner(ctx context.Context, cli *clientv3.Client, topic string, p int32) (int32, bool, error) {
	resp, err := cli.Get(ctx, layout.New("").OwnerKey(topic, p))
	if err != nil {
		return 0, false, err
	}
	if len(resp.Kvs) == 0 {
		return 0, false, nil
	}
	var o layout.Owner
	if err := layout.Unmarshal(resp.Kvs[0].Value, &o); err != nil {
		return 0, false, err
	}
	return o.Broker, true, nil
}
