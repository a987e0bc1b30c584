package waterline

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// DefaultTimeout bounds every RPC. The Filter and Score RPCs sit inside the serialized
// scheduling cycle, so this is also the most a sick scorer can add to one pod's cycle.
const DefaultTimeout = 100 * time.Millisecond

// Args is the plugin's entry in a profile's pluginConfig. No scheme is registered for it,
// so kube-scheduler hands it over as *runtime.Unknown and it is decoded with
// frameworkruntime.DecodeInto (JSON field names below, YAML accepted as well).
type Args struct {
	// Endpoint of the scorer's ScorerService, host:port (e.g. "waterline-scorer.waterline:50051").
	Endpoint string `json:"endpoint"`
	// Timeout of each RPC (default 100ms).
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// FailOpen (default true): when an RPC fails or times out, every node passes Filter, every
	// node gets the same score, and Reserve succeeds, so waterline can never stop a scheduler
	// from placing pods. When false, a failed RPC fails the pod's scheduling cycle and the pod
	// is retried with backoff.
	FailOpen *bool `json:"failOpen,omitempty"`
	// TLS to the scorer; plaintext when absent.
	TLS *TLSArgs `json:"tls,omitempty"`
	// Session (default true): ask the scorer over one Session stream, one Evaluate waited for
	// per cycle and Reserve/Unreserve written without waiting. false: use only the unary RPCs,
	// as a scorer older than Session is asked: Filter (all_nodes) at PreFilter, Score at
	// PreScore, Reserve and Unreserve, each waited for (three round trips per pod instead of
	// one). For a network path between the scheduler and the scorer that does not carry
	// long-lived bidirectional streams well (a proxy or load balancer that buffers, times out
	// or cuts them), and for measuring the pre-Session path against the stream.
	Session *bool `json:"session,omitempty"`
	// Policy names the scorer's policy this profile is answered with (the scorer's
	// `--policy NAME=PATH`); empty: the scorer's default policy. kube-scheduler gives every
	// profile its own plugin args, so a `batch` profile and a `web` profile can ask for
	// different policies of one scorer (docs/operations.md#policies-per-profile). A name the
	// scorer does not serve fails every call (INVALID_ARGUMENT), which failOpen then lets pass.
	Policy string `json:"policy,omitempty"`
}

// TLSArgs configures the client side of a TLS connection to the scorer.
type TLSArgs struct {
	// CAFile verifies the scorer's certificate; the system roots are used when empty.
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile are the client certificate for mutual TLS; both or neither.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// ServerName overrides the name checked against the scorer's certificate
	// (default: the host part of Endpoint).
	ServerName string `json:"serverName,omitempty"`
	// InsecureSkipVerify disables verification of the scorer's certificate. Tests only.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// policyName is the scorer's rule for a policy name (runtime/src/policy.rs check_policy_name).
var policyName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// config is Args with the defaults applied and the values checked.
type config struct {
	endpoint string
	timeout  time.Duration
	failOpen bool
	session  bool
	policy   string
	tls      *TLSArgs
}

// decodeArgs turns the profile's args into a checked config.
func decodeArgs(obj runtime.Object) (config, error) {
	var args Args
	if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
		return config{}, fmt.Errorf("decoding %s args: %w", Name, err)
	}
	cfg := config{
		endpoint: args.Endpoint,
		timeout:  DefaultTimeout,
		failOpen: true,
		session:  true,
		policy:   args.Policy,
		tls:      args.TLS,
	}
	if args.Timeout != nil {
		cfg.timeout = args.Timeout.Duration
	}
	if args.FailOpen != nil {
		cfg.failOpen = *args.FailOpen
	}
	if args.Session != nil {
		cfg.session = *args.Session
	}
	return cfg, cfg.validate()
}

func (c config) validate() error {
	var errs []error
	if c.endpoint == "" {
		errs = append(errs, errors.New("endpoint is required (host:port of the waterline scorer)"))
	} else if _, _, err := net.SplitHostPort(c.endpoint); err != nil {
		errs = append(errs, fmt.Errorf("endpoint %q is not host:port: %w", c.endpoint, err))
	}
	if c.timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout must be positive, got %v", c.timeout))
	}
	if c.policy != "" && !policyName.MatchString(c.policy) {
		errs = append(errs, fmt.Errorf("policy %q must be lowercase letters, digits and '-', start with a letter and have at most 63 characters (as the scorer's --policy NAME=PATH)", c.policy))
	}
	if c.tls != nil && (c.tls.CertFile == "") != (c.tls.KeyFile == "") {
		errs = append(errs, errors.New("tls.certFile and tls.keyFile must be set together"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid %s args: %w", Name, err)
	}
	return nil
}
