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

Self-managed mode, run by the controller (docs/adr/0029), never by the webhook::

    from trussium_operator.certs.selfmanaged import SelfManaged
    keeper = SelfManaged(api_client, namespace=ns, secret_name=WEBHOOK_SECRET_NAME,
                         ca_secret_name=WEBHOOK_CA_SECRET_NAME, dns_names=names,
                         ip_addresses=ips, webhook_config_names=[WEBHOOK_CONFIG_NAME])
    await keeper.ensure()                  # both Secrets and the caBundles; API errors raise
    task = asyncio.create_task(keeper.run())    # renewals, every minute

The webhook pods mount the serving Secret and serve it with ReloadingTLS.

The `trussium-webhook certs generate|inject` commands built on this package
live with the webhook's command line (`webhook/certs_cli.py`): this package
is a library and imports nothing but `common`.

Modules: `authority` (CA and serving certificates, PEM helpers, renewal
test; pure but for key generation), `rotation` (what the two Secrets should
hold next; pure), `files` (the folder, atomic writes), `served` (a
certificate's serial, expiry and key type read without `cryptography`, which
serving never imports; pure), `reload`, `inject` (caBundle patches),
`selfmanaged`.
"""
