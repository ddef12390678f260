package kafka

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Web identity: the STS AssumeRoleWithWebIdentity call that EKS IAM roles for service accounts
// (IRSA) rely on. The EKS Pod Identity webhook injects AWS_ROLE_ARN and
// AWS_WEB_IDENTITY_TOKEN_FILE (a projected service-account token the kubelet rotates); the
// client trades the token for temporary credentials itself. The call is unsigned: STS
// authenticates it by the token alone, so no AWS SDK (and no SigV4 signing) is needed.
//
// Request and response shapes: AWS STS API Reference, "AssumeRoleWithWebIdentity"
// (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html)
// and "Common Parameters" / "Common Errors" of the same reference: the Query protocol,
// Action=AssumeRoleWithWebIdentity, Version=2011-06-15, RoleArn, RoleSessionName,
// WebIdentityToken and optional DurationSeconds (900 s up to the role's maximum session
// duration, STS's default 3600 s), as form parameters; the answer is XML,
// AssumeRoleWithWebIdentityResponse > AssumeRoleWithWebIdentityResult > Credentials with
// AccessKeyId, SecretAccessKey, SessionToken and Expiration (ISO 8601), or on failure
// ErrorResponse > Error with Type, Code and Message. Endpoint overrides:
// AWS SDKs and Tools Reference Guide, "Service-specific endpoints"
// (https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html):
// AWS_ENDPOINT_URL_STS, then AWS_ENDPOINT_URL, both ignored when
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true.

// WebIdentityRefreshMargin is how long before their Expiration web-identity credentials are
// fetched again (credentials expiring sooner are fetched at every call).
const WebIdentityRefreshMargin = 5 * time.Minute

// stsTimeout bounds one AssumeRoleWithWebIdentity round trip.
const stsTimeout = 15 * time.Second

// stsMaxResponse bounds the STS answer read (a credentials response is a few kilobytes).
const stsMaxResponse = 1 << 20

// WebIdentity configures AssumeRoleWithWebIdentity (see WebIdentityCredentials).
type WebIdentity struct {
	// RoleARN is the role to assume (AWS_ROLE_ARN).
	RoleARN string
	// TokenFile holds the web identity token (AWS_WEB_IDENTITY_TOKEN_FILE); it is read again
	// at every call to STS, so a token the kubelet rotated is used.
	TokenFile string
	// SessionName is the RoleSessionName (AWS_ROLE_SESSION_NAME). Empty:
	// "kafka-queue-operator-<unix time of the call>".
	SessionName string
	// Endpoint is the STS URL the form is posted to (see STSEndpointFromEnv).
	Endpoint string
	// Duration, when set, is sent as DurationSeconds (whole seconds); zero: STS's default.
	Duration time.Duration
	// HTTPClient makes the call; nil: a client with a 15-second timeout.
	HTTPClient *http.Client
}

// STSEndpointFromEnv is the STS endpoint the AWS SDKs would use: AWS_ENDPOINT_URL_STS, else
// AWS_ENDPOINT_URL (unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true), else the regional
// endpoint https://sts.<region>.amazonaws.com (.amazonaws.com.cn in the China regions) of
// AWS_REGION or AWS_DEFAULT_REGION, else the global https://sts.amazonaws.com.
func STSEndpointFromEnv() string {
	if ignore, _ := strconv.ParseBool(os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")); !ignore {
		for _, v := range []string{"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"} {
			if e := strings.TrimSpace(os.Getenv(v)); e != "" {
				return e
			}
		}
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	switch {
	case region == "":
		return "https://sts.amazonaws.com"
	case strings.HasPrefix(region, "cn-"):
		return "https://sts." + region + ".amazonaws.com.cn"
	default:
		return "https://sts." + region + ".amazonaws.com"
	}
}

// WebIdentityCredentials is an AWS function calling STS AssumeRoleWithWebIdentity: the first
// call fetches credentials, later calls reuse them until WebIdentityRefreshMargin before their
// Expiration. A failed refresh while the cached credentials have not yet expired returns the
// cached ones; otherwise the error. Calls are serialised. Errors name the role, the endpoint
// and STS's error code and message, never the token or the credentials.
func WebIdentityCredentials(w WebIdentity) func(context.Context) (AWSCredentials, error) {
	p := &webIdentityProvider{cfg: w}
	return p.get
}

type webIdentityProvider struct {
	cfg     WebIdentity
	mu      sync.Mutex
	creds   AWSCredentials
	expires time.Time
}

func (p *webIdentityProvider) get(ctx context.Context) (AWSCredentials, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.creds.AccessKeyID != "" && now.Before(p.expires.Add(-WebIdentityRefreshMargin)) {
		return p.creds, nil
	}
	c, exp, err := p.cfg.assume(ctx, now)
	if err != nil {
		if p.creds.AccessKeyID != "" && now.Before(p.expires) {
			return p.creds, nil
		}
		return AWSCredentials{}, err
	}
	p.creds, p.expires = c, exp
	return c, nil
}

// stsCredentialsResponse is AssumeRoleWithWebIdentityResponse (the fields used).
type stsCredentialsResponse struct {
	XMLName     xml.Name `xml:"AssumeRoleWithWebIdentityResponse"`
	Credentials struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string `xml:"SecretAccessKey"`
		SessionToken    string `xml:"SessionToken"`
		Expiration      string `xml:"Expiration"`
	} `xml:"AssumeRoleWithWebIdentityResult>Credentials"`
}

// stsErrorResponse is the Query protocol's ErrorResponse.
type stsErrorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Error   struct {
		Type, Code, Message string
	} `xml:"Error"`
}

// assume makes one AssumeRoleWithWebIdentity call.
func (w WebIdentity) assume(ctx context.Context, now time.Time) (AWSCredentials, time.Time, error) {
	fail := func(format string, a ...any) (AWSCredentials, time.Time, error) {
		return AWSCredentials{}, time.Time{}, fmt.Errorf("STS AssumeRoleWithWebIdentity for role %s at %s: %s", w.RoleARN, w.Endpoint, fmt.Sprintf(format, a...))
	}
	b, err := os.ReadFile(w.TokenFile)
	if err != nil {
		// The *PathError names the file, not its content.
		return fail("web identity token file: %v", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return fail("web identity token file %s is empty", w.TokenFile)
	}
	session := w.SessionName
	if session == "" {
		session = "kafka-queue-operator-" + strconv.FormatInt(now.Unix(), 10)
	}
	form := url.Values{
		"Action":           {"AssumeRoleWithWebIdentity"},
		"Version":          {"2011-06-15"},
		"RoleArn":          {w.RoleARN},
		"RoleSessionName":  {session},
		"WebIdentityToken": {token},
	}
	if w.Duration > 0 {
		form.Set("DurationSeconds", strconv.Itoa(int(w.Duration/time.Second)))
	}
	// POST: the token travels in the body, so it is in no URL (and no *url.Error's text).
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.Endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fail("%v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("User-Agent", "kafka-queue-operator")
	hc := w.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: stsTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fail("%v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, stsMaxResponse))
	if err != nil {
		return fail("reading the answer (HTTP %d): %v", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e stsErrorResponse
		if xml.Unmarshal(body, &e) == nil && e.Error.Code != "" {
			// STS does not quote the token in its messages; strip it anyway.
			msg := strings.ReplaceAll(e.Error.Message, token, "[token]")
			return fail("%s: %s (HTTP %d)", e.Error.Code, msg, resp.StatusCode)
		}
		return fail("answered %s", resp.Status)
	}
	var r stsCredentialsResponse
	if err := xml.Unmarshal(body, &r); err != nil {
		return fail("answer is not an AssumeRoleWithWebIdentityResponse: %v", err)
	}
	c := r.Credentials
	if c.AccessKeyID == "" || c.SecretAccessKey == "" || c.SessionToken == "" {
		return fail("answer holds no credentials")
	}
	exp, err := time.Parse(time.RFC3339, strings.TrimSpace(c.Expiration))
	if err != nil {
		return fail("credentials Expiration %q: %v", c.Expiration, err)
	}
	return AWSCredentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}, exp, nil
}

// webIdentityCache shares one provider (and so one set of cached credentials) among all
// AWSCredentialsFromEnv functions that see the same web identity settings: the manager builds
// its connection settings again at every probe, and the sidecar checks the environment once
// at start before using it.
var webIdentityCache = struct {
	sync.Mutex
	m map[WebIdentity]func(context.Context) (AWSCredentials, error)
}{m: map[WebIdentity]func(context.Context) (AWSCredentials, error){}}

// webIdentityFromEnv returns the provider for the environment's web identity settings.
func webIdentityFromEnv(roleARN, tokenFile string) func(context.Context) (AWSCredentials, error) {
	w := WebIdentity{RoleARN: roleARN, TokenFile: tokenFile, SessionName: os.Getenv("AWS_ROLE_SESSION_NAME"), Endpoint: STSEndpointFromEnv()}
	webIdentityCache.Lock()
	defer webIdentityCache.Unlock()
	f, ok := webIdentityCache.m[w]
	if !ok {
		f = WebIdentityCredentials(w)
		webIdentityCache.m[w] = f
	}
	return f
}
