export const HELP = `Usage: kube-node-ready worker [flags]

Runs the node verification checks from inside a pod on the node, logs one JSON line per check
and a summary, writes the summary to the termination log, and exits:
  0 every enabled check passed   1 a check failed   2 configuration error   3 internal error

Flags (a flag wins over the config file and the environment):
  --config PATH              YAML file: the worker section, or a controller config whose
                             worker.checks holds it
  --checks LIST              checks to run, comma-separated
                             (default dns,api,tcp,service,podnet,mtu,egress,http)
  --dns-server HOST[:PORT]   nameserver to test instead of resolv.conf's; repeatable or
                             comma-separated; IPv6 as [addr]:port
  --dns-names LIST           names to resolve (default kubernetes.default.svc.<cluster-domain>)
  --external-dns-names LIST  names outside the cluster to resolve (default none: air-gap safe)
  --tcp-targets LIST         extra host:port targets for the tcp check
  --service NS/NAME          Service that must have ready endpoints; repeatable
                             (default default/kubernetes)
  --dns-service NS/NAME      the cluster DNS Service (default kube-system/kube-dns)
  --podnet-mode any|all      podnet passes when any / all DNS pods answer (default any)
  --mtu BYTES                packet size the mtu check sends (default: the MTU of the pod's
                             default-route interface)
  --large-dns-name NAME      a name whose answer is larger than 1500 bytes, for the mtu check's
                             large answers (default none: not tested)
  --egress-port PORT         port the egress check connects to on each address of the external
                             names (default 443)
  --http-urls LIST           http:// or https:// URLs the http check GETs from this pod, each
                             expecting 200-399 (ranges and CAs per URL: config file http.targets;
                             default none: nothing is contacted)
  --api-endpoints LIST       API server IP:PORT to read through when the kubernetes Service does
                             not connect (reported as kube-proxy / Service routing)
  --on-slow warn|fail        what a latency over a check's slowAfter does (default warn)
  --dns-slow-after DURATION  a DNS answer slower than this is slow (default 1s)
  --cluster-domain DOMAIN    cluster DNS domain (default cluster.local)
  --check-timeout DURATION   timeout of each check (default 5s)
  --timeout DURATION         overall deadline of the run (default 30s)
  --termination-log PATH     where the summary goes (default /dev/termination-log)
  --log-format json|pretty   (default json)
  --log-level LEVEL          trace, debug, info, warn, error, fatal or silent (default info)
  -h, --help                 this text
  --version                  version and commit

Durations are written like Kubernetes ones: 500ms, 5s, 1m.

Environment:
  KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT   the API server (set in every pod)
  KNR_SERVICEACCOUNT_DIR   token, ca.crt, namespace (default /var/run/secrets/kubernetes.io/serviceaccount)
  KNR_RESOLV_CONF          resolv.conf to read nameservers from (default /etc/resolv.conf)
  KNR_TERMINATION_LOG      termination log path (the flag wins)
  NODE_NAME, POD_NAME, POD_NAMESPACE   identify the run in logs and the summary

Only --checks dns and --checks http need no cluster:
  kube-node-ready worker --checks dns --dns-server 127.0.0.1:5353 --dns-names example.internal
  kube-node-ready worker --checks http --http-urls http://web.team.svc.cluster.local:8080/healthz

Full reference: docs/worker.md
`;
