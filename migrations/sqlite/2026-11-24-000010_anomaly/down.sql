DROP TABLE anomaly_feedback;
DROP TABLE anomaly_reports;
