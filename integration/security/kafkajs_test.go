package security

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// kafkajs runs the matrix's node/sasl.js: produce and read back in a group
// over SASL_SSL, with the mechanism settings in vars.
func kafkajs(t *testing.T, env *saslEnv, topic string, vars ...string) {
	t.Helper()
	modules, err := filepath.Abs(filepath.Join("..", "compat", "node", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: install Node.js 18+ and run scripts/install-clients.sh")
	}
	if _, err := os.Stat(filepath.Join(modules, "kafkajs")); err != nil {
		t.Skip("kafkajs is not installed: run scripts/install-clients.sh (npm ci in integration/compat/node)")
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, caFile, env.caPEM)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("..", "compat", "node", "sasl.js"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "BOOTSTRAP="+env.secure, "CA_FILE="+caFile,
		"TOPIC="+topic, "GROUP="+topic+"-group", "COUNT=5")
	cmd.Env = append(cmd.Env, vars...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kafkajs: %v\n%s", err, stderr)
	}
	var res struct{ Produced, Consumed int }
	if err := json.Unmarshal(out, &res); err != nil || res.Produced != 5 || res.Consumed < 5 {
		t.Fatalf("kafkajs reported %q (%v)", out, err)
	}
}

func TestKafkajsOAuthBearer(t *testing.T) {
	env, key := oauthEnv(t, 0)
	tok := signToken(t, key, claims("svc-js", testAudience, time.Now().Add(time.Hour)))
	kafkajs(t, env, "kafkajs-oauth", "MECHANISM=oauthbearer", "TOKEN="+tok)
	if want := `"principal":"User:svc-js","mechanism":"OAUTHBEARER"`; !contains(env.audit.String(), want) {
		t.Errorf("audit log lacks %s", want)
	}
}
