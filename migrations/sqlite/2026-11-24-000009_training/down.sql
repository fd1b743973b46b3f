DROP INDEX IF EXISTS jobs_one_training_idx;
DROP TABLE model_active;
DROP TABLE model_versions;
