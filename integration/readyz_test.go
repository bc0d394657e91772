package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
)

type readyzAnswer struct {
	Ready       bool `json:"ready"`
	LiveBrokers int  `json:"live_brokers"`
}

func getReadyz(ctx context.Context, adminAddr string) (readyzAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+adminAddr+"/readyz", nil)
	if err != nil {
		return readyzAnswer{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return readyzAnswer{}, err
	}
	defer resp.Body.Close()
	var r readyzAnswer
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return readyzAnswer{}, fmt.Errorf("decode /readyz: %w", err)
	}
	return r, nil
}

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
