// Package bedrock is the "bedrock" model provider: Amazon Bedrock's
// Converse API (POST /model/{modelId}/converse-stream, and /converse for
// models that cannot stream with tools) and its foundation-model list
// (GET /foundation-models).
//
// Settings:
//   - APIKey: a Bedrock API key, sent as "Authorization: Bearer <key>";
//     no SigV4 signing then.
//   - Extra["access_key_id"], ["secret_access_key"], ["session_token"]:
//     AWS access keys, used when APIKey is empty; requests are signed with
//     SigV4 (service "bedrock").
//   - Extra["profile"]: else the named profile (default "default") of the
//     AWS shared config and credentials files, resolved by the AWS SDK
//     (static keys, assume-role, SSO, credential_process).
//     Extra["config_file"] and ["credentials_file"] name those files; when
//     empty the SDK's defaults (~/.aws/config, ~/.aws/credentials) apply.
//   - Extra["region"]: the AWS region, default "us-west-2".
//   - BaseURL: replaces both https://bedrock-runtime.{region}.amazonaws.com
//     and https://bedrock.{region}.amazonaws.com (a proxy, or a test
//     server).
//
// The stream is AWS's event-stream binary framing, decoded (both CRCs
// checked) by aws-sdk-go-v2's aws/protocol/eventstream; signing is
// aws-sdk-go-v2's aws/signer/v4, checked against AWS's published SigV4 test
// suite in testdata/sigv4.
package bedrock
