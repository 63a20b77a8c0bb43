resource "google_spanner_instance" "main" {
  name         = "main-spanner"
  config       = "regional-us-central1"
  display_name = "Main"
  num_nodes    = 1
}

resource "google_spanner_database" "orders" {
  instance                 = google_spanner_instance.main.name
  name                     = "orders"
  version_retention_period = "3d"
  ddl                      = ["CREATE TABLE t (id INT64) PRIMARY KEY (id)"]
  deletion_protection      = false
}
