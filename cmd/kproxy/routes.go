package main

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"
)

func routesCommand() *cli.Command {
	return &cli.Command{
		Name:  "routes",
		Usage: "print a proxy's routing table (brokers, partition owners and epochs)",
		Flags: []cli.Flag{
			stringFlag("admin", "127.0.0.1:9644", "the proxy's admin HTTP address"),
			boolFlag("json", false, "print the raw JSON"),
		},
		Action: runRoutes,
	}
}

func runRoutes(c *cli.Context) error {
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + c.String("admin") + "/v1/routes"
	req, err := http.NewRequestWithContext(c.Context, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("read %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	if c.Bool("json") {
		_, err = c.App.Writer.Write(body)
		return err
	}
	return formatRoutes(c.App.Writer, body)
}
