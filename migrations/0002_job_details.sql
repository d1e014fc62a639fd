-- Who started a job and why it failed, for `lost` / `failed_to_start` diagnostics.
ALTER TABLE jobs ADD COLUMN subject TEXT;
ALTER TABLE jobs ADD COLUMN error TEXT;
