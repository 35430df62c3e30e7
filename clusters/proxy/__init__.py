"""The proxies kchaos puts between clients and brokers, and between brokers: the message proxy
(``exchange`` what flows through it, ``server`` its connections and control API, ``filters``
what each rule kind does to a request and its answer, ``front`` its front mode with address
rewriting and TLS, ``client`` the harness's side, ``__main__`` its process, ``python -m
kchaos.clusters.proxy``), its rules (``rules``), Toxiproxy and the links as its proxies
(``toxiproxy``, ``links``), and the front's throw-away certificates (``tls_certs``). Nothing here
imports the cluster contract or a backend."""
