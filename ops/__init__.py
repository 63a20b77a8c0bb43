"""Operations tooling beside the framework, not part of it: a team's MLflow on PostgreSQL
(`team_server`). No kernel or domain module imports it."""
