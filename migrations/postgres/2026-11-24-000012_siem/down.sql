DROP TABLE siem_stats;
DROP TABLE siem_outbox;
