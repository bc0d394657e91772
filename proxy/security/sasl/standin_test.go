package sasl

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"
)

// realCreds holds users created as credstore creates them: the default
// iterations and a random salt of the default length.
func realCreds(t testing.TB, users ...string) creds {
	t.Helper()
	c := creds{}
	for _, u := range users {
		for _, m := range []string{ScramSHA256, ScramSHA512} {
			salt := make([]byte, DefaultSaltLen)
			rand.Read(salt)
			sc, err := FromPassword(m, u+"-pw", salt, DefaultIterations)
			if err != nil {
				t.Fatal(err)
			}
			c[m+"/"+u] = sc
		}
	}
	return c
}

// serverFirst runs a SCRAM exchange up to the server's first message and
// returns its salt and iteration count.
func serverFirst(t *testing.T, a *Authenticator, mech, user string) ([]byte, int) {
	t.Helper()
	s := a.NewSession(true)
	if resp, _ := handshake(t, s, 1, mech); resp.ErrorCode != 0 {
		t.Fatalf("handshake %s: error %d", mech, resp.ErrorCode)
	}
	gen := scram.SHA512
	if mech == ScramSHA256 {
		gen = scram.SHA256
	}
	cl, err := gen.NewClientUnprepped(user, "x", "")
	if err != nil {
		t.Fatal(err)
	}
	first, err := cl.NewConversation().Step("")
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := authenticate(t, s, []byte(first))
	if resp.ErrorCode != 0 {
		t.Fatalf("%s %s: first step answered %d", mech, user, resp.ErrorCode)
	}
	var salt []byte
	iters := -1
	for _, kv := range strings.Split(string(resp.SASLAuthBytes), ",") {
		switch {
		case strings.HasPrefix(kv, "s="):
			if salt, err = base64.StdEncoding.DecodeString(kv[2:]); err != nil {
				t.Fatalf("salt %q: %v", kv, err)
			}
		case strings.HasPrefix(kv, "i="):
			if iters, err = strconv.Atoi(kv[2:]); err != nil {
				t.Fatalf("iterations %q: %v", kv, err)
			}
		}
	}
	return salt, iters
}

// TestSCRAMStandInLooksReal: the server's first message for an unknown
// user has a real user's iteration count and salt length, and the same
// salt each time (a real user's salt does not change between tries), on
// every replica that shares the secret.
func TestSCRAMStandInLooksReal(t *testing.T) {
	secret := []byte("shared by the replicas")
	cr := realCreds(t, "alice")
	a := newAuth(t, Config{Credentials: cr, Secret: secret})
	replica := newAuth(t, Config{Credentials: cr, Secret: secret})
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		realSalt, realIters := serverFirst(t, a, mech, "alice")
		salt, iters := serverFirst(t, a, mech, "mallory")
		if iters != realIters || len(salt) != len(realSalt) {
			t.Errorf("%s: unknown user answered %d iterations and a %d-byte salt; a real user %d and %d bytes",
				mech, iters, len(salt), realIters, len(realSalt))
		}
		if again, _ := serverFirst(t, a, mech, "mallory"); !slices.Equal(again, salt) {
			t.Errorf("%s: the unknown user's salt changed between tries", mech)
		}
		if other, _ := serverFirst(t, replica, mech, "mallory"); !slices.Equal(other, salt) {
			t.Errorf("%s: another replica with the same secret gives another salt", mech)
		}
		if other, _ := serverFirst(t, a, mech, "trudy"); slices.Equal(other, salt) {
			t.Errorf("%s: two unknown users share a salt", mech)
		}
	}
}

// plainAttempt times one failed PLAIN authentication.
func plainAttempt(t *testing.T, a *Authenticator, user string) time.Duration {
	t.Helper()
	s := a.NewSession(true)
	if resp, _ := handshake(t, s, 1, Plain); resp.ErrorCode != 0 {
		t.Fatalf("handshake PLAIN: error %d", resp.ErrorCode)
	}
	msg := []byte("\x00" + user + "\x00wrong-password")
	start := time.Now()
	_, o := authenticate(t, s, msg)
	d := time.Since(start)
	if !o.Fail {
		t.Fatalf("PLAIN %s with a wrong password: outcome %+v, want a failure", user, o)
	}
	return d
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestPlainTimingDoesNotTellUsers: a failed PLAIN login takes as long for
// an unknown user as for an existing one (wrong password). Tries are
// interleaved, alternating which goes first, so load on the machine falls
// on both alike; the medians must differ by under 1 ms. The test checks
// that it could see the gap it guards against (an unknown user skipping
// the key derivation): a derivation, timed between the tries, must cost
// at least 1.5 ms in the round, else the iteration count (users' and
// stand-ins') doubles and the round does not count. Small counts keep noise, which grows with the work, low in or
// out of -race; on a machine loaded enough that one round's medians drift
// apart, up to three rounds are measured and one must pass (skipping the
// derivation fails every round: its gap is the whole derivation).
func TestPlainTimingDoesNotTellUsers(t *testing.T) {
	const pairs = 201
	budget := time.Now().Add(90 * time.Second)
	iters := 128
	for {
		_, _, derive := plainTimings(t, iters, 21, budget)
		if derive >= 1500*time.Microsecond || iters >= 16384 {
			break
		}
		iters *= 2
	}
	var failed []string
	for round := 0; len(failed) < 3 && round < 8; round++ {
		k, u, derive := plainTimings(t, iters, pairs, budget)
		gap := k - u
		r := fmt.Sprintf("%d iterations: derivation %v; median failure: existing user %v, unknown user %v (gap %v) over %d interleaved pairs",
			iters, derive, k, u, gap, pairs)
		t.Log(r)
		switch {
		case derive < 1500*time.Microsecond && iters < 16384:
			iters *= 2 // this round could not have seen the gap
		case gap < time.Millisecond && gap > -time.Millisecond:
			return
		default:
			failed = append(failed, r)
		}
	}
	t.Fatalf("PLAIN failure time tells users apart (or no round could tell):\n%s", strings.Join(failed, "\n"))
}

// plainTimings returns the median failure time of an existing and of an
// unknown user, and of one key derivation, with users of iters iterations.
func plainTimings(t *testing.T, iters, pairs int, budget time.Time) (known, unknown, derive time.Duration) {
	t.Helper()
	cr := creds{}
	for _, m := range []string{ScramSHA256, ScramSHA512} {
		salt := make([]byte, DefaultSaltLen)
		rand.Read(salt)
		sc, err := FromPassword(m, "alice-pw", salt, iters)
		if err != nil {
			t.Fatal(err)
		}
		cr[m+"/alice"] = sc
	}
	a := newAuth(t, Config{Credentials: cr, Mechanisms: []string{Plain}, StandInIterations: iters})
	var k, u, d []time.Duration
	for i := range pairs {
		if time.Now().After(budget) {
			t.Fatalf("out of time at %d iterations, pair %d of %d", iters, i, pairs)
		}
		if i%2 == 0 {
			k = append(k, plainAttempt(t, a, "alice"))
			u = append(u, plainAttempt(t, a, "mallory"))
		} else {
			u = append(u, plainAttempt(t, a, "mallory"))
			k = append(k, plainAttempt(t, a, "alice"))
		}
		start := time.Now()
		if _, err := FromPassword(ScramSHA512, "x", make([]byte, DefaultSaltLen), iters); err != nil {
			t.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	return median(k), median(u), median(d)
}
