DROP TABLE jobs;
DROP TABLE schedules;
