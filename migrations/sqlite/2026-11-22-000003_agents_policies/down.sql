DROP TABLE policies;
DROP TABLE agents;
