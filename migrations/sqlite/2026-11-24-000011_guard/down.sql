DROP TABLE guard_feedback;
