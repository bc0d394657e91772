// Package saramascram is the SCRAM client that sarama asks an application
// for (sarama.SCRAMClient), on github.com/xdg-go/scram: sarama ships none.
// Tests that drive sarama over SASL/SCRAM use it; its limit is that one
// Client serves one conversation at a time, as sarama uses it.
package saramascram

import "github.com/xdg-go/scram"

// Client runs one SCRAM conversation with the hash Hash (scram.SHA256 or
// scram.SHA512).
type Client struct {
	Hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

// Begin starts a conversation for user.
func (c *Client) Begin(user, pass, authzID string) error {
	cl, err := c.Hash.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}

// Step answers the server's challenge.
func (c *Client) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

// Done says the conversation is over.
func (c *Client) Done() bool { return c.conv.Done() }
