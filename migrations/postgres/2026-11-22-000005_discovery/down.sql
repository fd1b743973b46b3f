DROP TABLE discovery_source_counts;
DROP TABLE discovery_candidates;
