DROP TABLE hitl_requests;
