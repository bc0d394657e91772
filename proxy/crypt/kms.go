package crypt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"
)

// awsKMS is the AWS KMS API (AWS, LocalStack, moto) through the AWS SDK,
// with credentials from the SDK's standard chain (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, the shared files, the instance role).
type awsKMS struct {
	c       *kms.Client
	timeout time.Duration
}

// defaultKMSTimeout bounds one KMS call, its SDK retries included.
const defaultKMSTimeout = 5 * time.Second

func newAWSKMS(ctx context.Context, cfg KMSConfig) (*awsKMS, error) {
	acfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region))
	if err != nil {
		return nil, fmt.Errorf("crypt: AWS configuration: %w", err)
	}
	c := kms.NewFromConfig(acfg, func(o *kms.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		// The caller's timeout bounds the whole call; two attempts
		// ride out one dropped connection without doubling an outage's
		// wait much.
		o.RetryMaxAttempts = 2
	})
	t := cfg.Timeout
	if t <= 0 {
		t = defaultKMSTimeout
	}
	return &awsKMS{c: c, timeout: t}, nil
}

func (a *awsKMS) GenerateDataKey(ctx context.Context, kek string) (plain, wrapped []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	out, err := a.c.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{KeyId: aws.String(kek), KeySpec: types.DataKeySpecAes256})
	if err != nil {
		return nil, nil, classify("GenerateDataKey", err)
	}
	return out.Plaintext, out.CiphertextBlob, nil
}

func (a *awsKMS) Decrypt(ctx context.Context, wrapped []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	out, err := a.c.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: wrapped})
	if err != nil {
		return nil, classify("Decrypt", err)
	}
	return out.Plaintext, nil
}

// classify wraps err in ErrKeyRefused when the KMS answered no to this
// request (a client fault other than throttling: unknown, disabled or
// forbidden key, a ciphertext it did not make), else in ErrUnavailable.
func classify(op string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorFault() != smithy.FaultServer && !throttled(ae.ErrorCode()) {
		return fmt.Errorf("%w: %s: %s", ErrKeyRefused, op, ae.ErrorCode())
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

func throttled(code string) bool {
	switch code {
	case "ThrottlingException", "RequestLimitExceeded", "LimitExceededException", "DependencyTimeoutException", "KMSInternalException":
		return true
	}
	return false
}
