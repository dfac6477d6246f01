// Package clouds is how a call to a bedrock, gemini or vertex pool is
// made, handed to the router as values: a pool's signer and the path its
// models follow its endpoint's URL with. A bedrock pool's credentials
// come from AWS's default chain (environment, shared config and
// profiles, web identity, instance metadata), or from a role assumed
// with them, and a vertex pool's from Google's Application Default
// Credentials or a credentials file, each cached and refreshed before
// they expire by its cloud's SDK; each call is signed as it is sent
// (proxy.Call.Sign). A gemini pool's key goes as x-goog-api-key. Bodies
// are the cloud's own API's, their answers read back as chat
// (translate.BedrockUpstream, translate.GeminiUpstream), or, for
// Anthropic's models on Vertex AI, Anthropic's Messages API's
// (translate.AnthropicUpstream).
package clouds

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
	"gitea.mynodes.xyz/ilker/llmgw/internal/translate"
)

// Signer is what signs p's calls as they are sent: a bedrock pool's
// SigV4 signer, a vertex pool's bearer token; nil for every other kind,
// whose calls carry their key in a header.
func Signer(p catalog.Pool) proxy.Signer {
	switch p.Kind {
	case catalog.KindBedrock:
		return bedrockSigner(p)
	case catalog.KindVertex:
		return newGoogleSigner(p)
	}
	return nil
}

// bedrockSigner is what signs p's calls: the default chain's credentials
// in p's region, or p's role's assumed with them. Loading the chain reads
// the environment and files alone; no credential is fetched until the
// first call. A chain that does not load fails every call with a 502.
func bedrockSigner(p catalog.Pool) proxy.Signer {
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(p.Region))
	if err != nil {
		return translate.NewBedrockSigner(p.Region, nil, fmt.Errorf("pool %s: AWS credentials chain: %w", p.Name, err))
	}
	creds := cfg.Credentials
	if p.Role != "" {
		creds = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), p.Role,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = "llmgw-" + p.Name }))
	}
	if creds == nil {
		return translate.NewBedrockSigner(p.Region, nil, fmt.Errorf("pool %s: no AWS credentials chain", p.Name))
	}
	return translate.NewBedrockSigner(p.Region, creds, nil)
}

// Translated reports whether a pool of kind is a cloud's whose calls'
// bodies are translated from chat to the cloud's own API (bedrock,
// gemini, and vertex for Google's models); a vertex pool of Anthropic's
// models is sent Anthropic's Messages API, as an anthropic pool is.
func Translated(p catalog.Pool) bool {
	switch p.Kind {
	case catalog.KindBedrock, catalog.KindGemini:
		return true
	case catalog.KindVertex:
		return !Anthropic(p)
	}
	return false
}

// Anthropic reports whether p is a vertex pool of Anthropic's models
// (publisher anthropic): its calls Messages API bodies, sent to
// rawPredict and streamRawPredict.
func Anthropic(p catalog.Pool) bool {
	return p.Kind == catalog.KindVertex && p.Publisher == catalog.PublisherAnthropic
}

// apis are the APIs the translated kinds' calls are made with, by kind.
var apis = map[string]string{
	catalog.KindBedrock: "Bedrock's Converse API",
	catalog.KindGemini:  "the Gemini API's generateContent",
	catalog.KindVertex:  "Vertex AI's generateContent",
}

// API names the API a translated pool of kind is called with, as a
// refusal of what it has no counterpart of says it.
func API(kind string) string { return apis[kind] }

// Prefix is the path a vertex pool's model paths follow its endpoint's
// URL with: its project's, location's and publisher's (google unless
// the pool names anthropic); empty for every other kind.
func Prefix(p catalog.Pool) string {
	if p.Kind != catalog.KindVertex {
		return ""
	}
	publisher := catalog.PublisherGoogle
	if Anthropic(p) {
		publisher = catalog.PublisherAnthropic
	}
	return "/projects/" + url.PathEscape(p.Project) + "/locations/" + url.PathEscape(p.Location) + "/publishers/" + publisher
}

// googleScope is the OAuth scope Vertex AI's calls are made with.
const googleScope = "https://www.googleapis.com/auth/cloud-platform"

// googleSigner puts a bearer token from Google's credentials on each
// call: Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// gcloud's, workload identity, the metadata server), or a pool's
// credentials file. They are found at the first call, not when the pool
// is made, as looking for the metadata server may wait on the network;
// the token is cached and refreshed before it expires.
type googleSigner struct {
	pool string
	opts credentials.DetectOptions
	once sync.Once
	// creds and err are set once, by the first call.
	creds *auth.Credentials
	err   error
}

var _ proxy.Signer = (*googleSigner)(nil)

func newGoogleSigner(p catalog.Pool) *googleSigner {
	return &googleSigner{pool: p.Name, opts: credentials.DetectOptions{Scopes: []string{googleScope}, CredentialsFile: p.CredentialsFile}}
}

// Sign sets req's Authorization to the credentials' bearer token; an
// error names no secret.
func (s *googleSigner) Sign(ctx context.Context, req *http.Request, _ []byte) error {
	s.once.Do(func() {
		s.creds, s.err = credentials.DetectDefault(&s.opts)
		if s.err != nil {
			s.err = fmt.Errorf("pool %s: Google credentials: %w", s.pool, s.err)
		}
	})
	if s.err != nil {
		return s.err
	}
	tok, err := s.creds.Token(ctx)
	if err != nil {
		return fmt.Errorf("pool %s: Google token: %w", s.pool, err)
	}
	req.Header["Authorization"] = []string{"Bearer " + tok.Value}
	return nil
}
