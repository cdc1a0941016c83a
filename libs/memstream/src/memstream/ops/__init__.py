"""Operations: dependency probes and the Grafana dashboards generator."""
