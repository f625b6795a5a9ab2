// Host names the server could not resolve (DNSError; NetworkErrors before ClickHouse 20.3): hosts of
// remote_servers, interserver replicas, Keeper or dictionaries' sources. Altinity warns on any in a
// minute; dbm warns from one in ten minutes and calls 100 critical.
import { signalRule } from './signals.ts'

export const dnsErrors = signalRule({
  id: 'ch_dns_errors',
  summary: 'Host names the server could not resolve (remote servers, replicas, Keeper, dictionary sources).',
  collectors: ['server_metrics', 'log_events'],
  category: 'availability',
  thresholds: { window_s: 600, warning: 1, critical: 100 },
  signals: [
    {
      key: 'dns_errors',
      kind: 'counter',
      name: 'DNSError',
      what: 'failed host name resolutions',
      warning: 'warning',
      critical: 'critical',
    },
  ],
  title: () => 'Host names do not resolve',
  explain:
    'Connections to shards, replicas, Keeper or dictionary sources that start from a host name fail while it does not resolve; ClickHouse caches what it resolved, so a stale entry can also point at an old address.',
  recommendation:
    'Check /etc/resolv.conf and the names in remote_servers, interserver_http_host and zookeeper of the server config; after a DNS change, drop the cache.',
  how_to_investigate: [
    "SELECT name, value, last_error_time, last_error_message FROM system.errors WHERE name IN ('DNS_ERROR', 'ALL_CONNECTION_TRIES_FAILED', 'NETWORK_ERROR') ORDER BY last_error_time DESC;",
    'SELECT cluster, host_name, host_address, port, errors_count FROM system.clusters ORDER BY errors_count DESC;',
  ],
  how_to_fix: ['SYSTEM DROP DNS CACHE;   -- after the DNS entries are fixed'],
  errors: ['DNS_ERROR'],
})
