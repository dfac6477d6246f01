package translate

// How a call to Bedrock is signed: AWS Signature Version 4 by the SDK's
// own signer, over the request as it is sent (its endpoint's host, its
// body's SHA-256, the moment), with credentials from the pool's chain,
// which the SDK's cache refreshes before they expire.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// bedrockService is the signing name of Bedrock's runtime API.
const bedrockService = "bedrock"

// BedrockSigner signs calls to Bedrock in a region with credentials from
// a provider. It is safe for concurrent use.
type BedrockSigner struct {
	Region string
	// Credentials is the pool's chain, cached (aws.CredentialsCache);
	// when nil, Err says why there is none.
	Credentials aws.CredentialsProvider
	Err         error
	signer      *v4.Signer
}

// NewBedrockSigner signs in region with creds; err, when not nil, is why
// the pool has no credentials, and fails every call.
func NewBedrockSigner(region string, creds aws.CredentialsProvider, err error) *BedrockSigner {
	return &BedrockSigner{Region: region, Credentials: creds, Err: err, signer: v4.NewSigner()}
}

// Sign signs req, whose body is body, as of now. The credentials' error
// names no secret.
func (s *BedrockSigner) Sign(ctx context.Context, req *http.Request, body []byte) error {
	if s.Err != nil {
		return s.Err
	}
	creds, err := s.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("bedrock credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	return s.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), bedrockService, s.Region, time.Now())
}
