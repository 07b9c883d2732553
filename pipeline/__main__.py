"""`python -m pipeline`: run the pipeline with its configuration from the environment."""

import os

from pipeline.config import PipelineConfig
from pipeline.run import run_pipeline

if __name__ == "__main__":
    run_pipeline(PipelineConfig.from_env(os.environ))
