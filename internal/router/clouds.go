package router

// Cloud pools: how a call to a bedrock, gemini or vertex pool is made. A
// bedrock pool's credentials come from AWS's default chain (environment,
// shared config and profiles, web identity, instance metadata), or from a
// role assumed with them, and a vertex pool's from Google's Application
// Default Credentials or a credentials file, each cached and refreshed
// before they expire by its cloud's SDK; each call is signed as it is sent
// (proxy.Call.Sign). A gemini pool's key goes as x-goog-api-key. Bodies
// are the cloud's own API's, their answers read back as chat
// (translate.BedrockUpstream, translate.GeminiUpstream).

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
	"gitea.mynodes.xyz/ilker/llmgw/internal/translate"
)

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

// isCloud reports whether a pool of kind is a cloud's: its calls'
// bodies translated from chat (prepareCloud), and for bedrock and vertex
// signed as they are sent.
func isCloud(kind string) bool {
	return kind == catalog.KindBedrock || kind == catalog.KindGemini || kind == catalog.KindVertex
}

// cloudAPIs are the APIs the cloud kinds' calls are made with, by kind.
var cloudAPIs = map[string]string{
	catalog.KindBedrock: "Bedrock's Converse API",
	catalog.KindGemini:  "the Gemini API's generateContent",
	catalog.KindVertex:  "Vertex AI's generateContent",
}

// prepareCloud makes c, a call for req with a chat body, a call of p's
// cloud's own API: its body the request that asks what the chat body
// asks, for req's max tokens (defaultMaxTokens when it names none),
// refused with a 413 past limit bytes; signed as it is sent where the
// cloud signs; its answer read back as chat. An API the cloud has no
// counterpart of is a 400.
func (p *servedPool) prepareCloud(ctx context.Context, c *proxy.Call, req *parsedRequest, defaultMaxTokens, limit int64) error {
	kind := p.provider.kind
	if path := req.api.upstreamPath; path != "/chat/completions" {
		return openai.BadRequest("model", "The model is served by %s, which has no %s.", cloudAPIs[kind], strings.TrimPrefix(path, "/"))
	}
	if req.Choices > 1 {
		return openai.BadRequest("n", "The model is served by %s, which gives one answer a request: n must be 1.", cloudAPIs[kind])
	}
	ctx, cancel := workContext(ctx, c.Deadline)
	defer cancel()
	translateBody, provider := translate.ChatToBedrockBody, openai.Provider(translate.BedrockUpstream{})
	if kind != catalog.KindBedrock {
		translateBody, provider = translate.ChatToGeminiBody, translate.GeminiUpstream{}
	}
	body, err := translateBody(ctx, c.Body, req.outputBound(defaultMaxTokens), limit)
	if err != nil {
		return stopped(ctx, err)
	}
	c.Body, c.Provider, c.Sign = body, provider, p.provider.signer
	return nil
}

// vertexPrefix is the path of p's models after its endpoint's URL.
func vertexPrefix(p catalog.Pool) string {
	return "/projects/" + url.PathEscape(p.Project) + "/locations/" + url.PathEscape(p.Location) + "/publishers/google"
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
