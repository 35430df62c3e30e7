"""Workloads that drive pipelines and record every operation (issue: transactional
consume-transform-produce workload; share-group workload). Not implemented yet."""
