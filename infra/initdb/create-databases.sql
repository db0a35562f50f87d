-- Runs once when the compose PostgreSQL volume is created: the trajectory and Prefect databases.
CREATE DATABASE harness_s;
CREATE DATABASE prefect;
