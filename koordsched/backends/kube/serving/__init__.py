"""The secure serving port, as kube-scheduler serves it.

HTTPS on ``--secure-port`` (a self-signed certificate unless one is given), delegated
authentication (TokenReview, client certificates) and authorization (SubjectAccessReview on the
request's path), with only ``--authorization-always-allow-paths`` open. The modules, from the
bottom: ``options`` (what the flags set), ``ttlcache``, ``review`` (a bounded API call),
``authn``, ``authz``, ``tls``, ``filters`` (the aiohttp middleware and kube's response bodies),
``delegation`` (clients and the client-CA lookup) and ``servers`` (everything wired together).
"""
