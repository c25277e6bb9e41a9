package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/kilnhq/kiln/plugins/providers"
)

// signingService is the SigV4 service name of both Bedrock endpoints
// (bedrock-runtime signs as "bedrock" too).
const signingService = "bedrock"

// auth authorises requests, in the order the settings allow: a Bedrock API
// key as a bearer token, else static access keys, else a profile of the
// shared AWS config files.
type auth struct {
	bearer string
	static *aws.Credentials
	region string
	now    func() time.Time

	// The profile, loaded on first use (and again after a failed load, so
	// a fixed config file needs no restart).
	profile         string
	configFile      string
	credentialsFile string
	client          *http.Client
	mu              sync.Mutex
	creds           aws.CredentialsProvider
}

func newAuth(s providers.Settings, region string) *auth {
	a := &auth{region: region, now: time.Now, client: s.Client()}
	switch x := s.Extra; {
	case s.APIKey != "":
		a.bearer = s.APIKey
	case x["access_key_id"] != "" || x["secret_access_key"] != "":
		a.static = &aws.Credentials{AccessKeyID: x["access_key_id"], SecretAccessKey: x["secret_access_key"], SessionToken: x["session_token"], Source: "kiln settings"}
	default:
		a.profile = x["profile"]
		if a.profile == "" {
			a.profile = "default"
		}
		a.configFile, a.credentialsFile = x["config_file"], x["credentials_file"]
	}
	return a
}

// authorize sets req's Authorization for body, which it then attaches to
// req (req must have no body yet). Failing to get credentials is a
// KindAuth error.
func (a *auth) authorize(ctx context.Context, req *http.Request, body []byte) error {
	if a.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+a.bearer)
		setBody(req, body)
		return nil
	}
	creds, err := a.credentials(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &providers.Error{Provider: ID, Kind: providers.KindAuth, Message: err.Error()}
	}
	return signV4(ctx, req, body, creds, signingService, a.region, a.now())
}

func (a *auth) credentials(ctx context.Context) (aws.Credentials, error) {
	if a.static != nil {
		if a.static.AccessKeyID == "" || a.static.SecretAccessKey == "" {
			return aws.Credentials{}, errors.New("access_key_id and secret_access_key must both be set")
		}
		return *a.static, nil
	}
	p, err := a.profileCredentials(ctx)
	if err != nil {
		return aws.Credentials{}, err
	}
	c, err := p.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("AWS profile %q: %w", a.profile, err)
	}
	return c, nil
}

// profileCredentials loads the profile with the AWS SDK's shared-config
// resolution. The profile, the files and the region are passed explicitly,
// so they win over the AWS_* environment variables the SDK also consults.
func (a *auth) profileCredentials(ctx context.Context) (aws.CredentialsProvider, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.creds != nil {
		return a.creds, nil
	}
	opts := []func(*config.LoadOptions) error{
		config.WithSharedConfigProfile(a.profile),
		config.WithRegion(a.region),
		config.WithHTTPClient(a.client),
	}
	if a.configFile != "" {
		opts = append(opts, config.WithSharedConfigFiles([]string{a.configFile}))
	}
	if a.credentialsFile != "" {
		opts = append(opts, config.WithSharedCredentialsFiles([]string{a.credentialsFile}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS profile %q: %w", a.profile, err)
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("AWS profile %q has no credentials", a.profile)
	}
	a.creds = cfg.Credentials
	return a.creds, nil
}

// signV4 signs req with AWS Signature Version 4 for service in region at
// t, the SHA-256 of body as the payload hash, then attaches body. Every
// header already on req is signed (with host and X-Amz-Date, and
// X-Amz-Security-Token for temporary credentials); Content-Length is not,
// since the body is attached after signing, as in AWS's published test
// suite. This is the one signing path: requests and the test vectors both
// go through it.
func signV4(ctx context.Context, req *http.Request, body []byte, creds aws.Credentials, service, region string, t time.Time) error {
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), service, region, t); err != nil {
		return fmt.Errorf("sign request: %w", err)
	}
	setBody(req, body)
	return nil
}

func setBody(req *http.Request, body []byte) {
	if len(body) == 0 {
		return
	}
	req.ContentLength = int64(len(body))
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}
