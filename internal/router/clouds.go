package router

// Cloud pools: how a call to a bedrock pool is made. Its credentials come
// from AWS's default chain (environment, shared config and profiles, web
// identity, instance metadata), or from a role assumed with them, cached
// and refreshed before they expire by the SDK; each call is signed as it
// is sent (proxy.Call.Sign), and its body is a Converse request, its
// answer read back as chat (translate.BedrockUpstream).

import (
	"context"
	"fmt"
	"strings"

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

// prepareBedrock makes c, a call for req with a chat body, a Converse
// call: its body the Converse request that asks what the chat body asks,
// for req's max tokens (defaultMaxTokens when it names none), refused
// with a 413 past limit bytes; signed as it is sent; its answer read
// back as chat. An API Converse has no counterpart of is a 400.
func (p *servedPool) prepareBedrock(ctx context.Context, c *proxy.Call, req *parsedRequest, defaultMaxTokens, limit int64) error {
	if path := req.api.upstreamPath; path != "/chat/completions" {
		return openai.BadRequest("model", "The model is served by Bedrock's Converse API, which has no %s.", strings.TrimPrefix(path, "/"))
	}
	if req.Choices > 1 {
		return openai.BadRequest("n", "The model is served by Bedrock's Converse API, which gives one answer a request: n must be 1.")
	}
	ctx, cancel := workContext(ctx, c.Deadline)
	defer cancel()
	body, err := translate.ChatToBedrockBody(ctx, c.Body, req.outputBound(defaultMaxTokens), limit)
	if err != nil {
		return stopped(ctx, err)
	}
	c.Body, c.Provider, c.Sign = body, translate.BedrockUpstream{}, p.provider.signer
	return nil
}
