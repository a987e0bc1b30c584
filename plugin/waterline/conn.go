package waterline

import (
	"crypto/tls"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// maxAnswerBytes bounds one answer from the scorer.
const maxAnswerBytes = 64 << 20

// dial creates the plugin's one connection to the scorer. grpc.NewClient does not block:
// a scorer that is down at start-up must not keep the scheduler from starting, it only
// makes the RPCs fail (and, with failOpen, fall back to neutral answers) until it is up.
func dial(cfg config, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	creds, err := transportCredentials(cfg)
	if err != nil {
		return nil, err
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// An all_nodes Filter answer lists every rejected node with its reason (~60 bytes
		// each, up to ~250 with six breached metrics): grpc-go's default 4 MiB receive limit
		// would fail a large, overloaded cluster exactly when the filter matters most.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxAnswerBytes)),
	}, extra...)
	conn, err := grpc.NewClient(cfg.endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to waterline scorer %q: %w", cfg.endpoint, err)
	}
	// Start connecting now rather than on the first pod, so the first scheduling cycle does
	// not spend its RPC timeout on the TCP and TLS handshakes.
	conn.Connect()
	return conn, nil
}

func transportCredentials(cfg config) (credentials.TransportCredentials, error) {
	if cfg.tls == nil {
		return insecure.NewCredentials(), nil
	}
	t := cfg.tls
	serverName := t.ServerName
	if serverName == "" {
		// validate() has checked that the endpoint is host:port.
		serverName, _, _ = net.SplitHostPort(cfg.endpoint)
	}
	files, err := newTLSFiles(t)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		// The client certificate is looked up on every handshake, so a renewed one is
		// presented by the next connection.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return files.clientCertificate(), nil
		},
	}
	if t.InsecureSkipVerify {
		tc.InsecureSkipVerify = true //nolint:gosec // opt-in, documented as tests only
	} else {
		// crypto/tls checks the peer against a fixed RootCAs; the check is done here
		// instead, against the CA pool in use (the same verification crypto/tls does).
		tc.InsecureSkipVerify = true //nolint:gosec // verified in VerifyConnection below
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			return files.verify(cs, serverName)
		}
	}
	return credentials.NewTLS(tc), nil
}
