"""TLS certificates for the admission webhook (docs/certificates.md).

Every mode ends in one folder holding `tls.crt`, `tls.key` and optionally
`ca.crt`, served through a reloading SSLContext. The API the webhook uses:

Serving (all modes)::

    from trussium_operator.certs.reload import ReloadingTLS
    tls = ReloadingTLS(cert_dir)           # loads now; CertificateError if unusable
    web.TCPSite(runner, host, port, ssl_context=tls.context)
    task = asyncio.create_task(tls.run())  # polls the files every 5 s (poll_seconds=)
    tls.not_after                          # expiry of the served certificate (metric)
    tls.reload()                           # reload now; True when a new cert is served

Self-managed mode (before constructing ReloadingTLS)::

    from trussium_operator.certs.authority import service_dns_names
    from trussium_operator.certs.selfmanaged import SelfManaged
    manager = SelfManaged(api_client, namespace=ns, secret_name=WEBHOOK_SECRET_NAME,
                          dns_names=service_dns_names(WEBHOOK_SERVICE_NAME, ns) + extra,
                          ip_addresses=ips, webhook_config_names=[WEBHOOK_CONFIG_NAME],
                          cert_dir=cert_dir)
    await manager.ensure()                 # Secret, folder and caBundles; API errors raise
    manager.on_files_changed = tls.reload  # optional: reload at once instead of next poll
    task = asyncio.create_task(manager.run())   # renewals and other replicas' changes

Command line: `certs.cli.add_certs_commands(subparsers)` mounts `certs
generate` and `certs inject`; the chosen command sets `args.handler`, which
takes the parsed namespace and returns the exit code. `certs.cli.main_certs(argv)`
runs them standalone.

Modules: `authority` (CA and serving certificates, PEM helpers, renewal
test; pure but for key generation), `rotation` (what the Secret should hold
next; pure), `files` (the folder, atomic writes), `reload`, `inject`
(caBundle patches), `selfmanaged`, `cli`.
"""
