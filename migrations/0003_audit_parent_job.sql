-- run_script: each subprocess's audit row names the script's job id (the script's own row has it as job_id).
ALTER TABLE audit ADD COLUMN parent_job_id TEXT;
