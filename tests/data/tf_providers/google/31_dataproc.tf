resource "google_dataproc_cluster" "etl" {
  name   = "etl"
  region = "us-central1"

  cluster_config {
    master_config {
      num_instances = 1
      machine_type  = "n2-standard-4"
    }

    worker_config {
      num_instances = 2
      machine_type  = "n2-standard-4"
      disk_config {
        boot_disk_size_gb = 100
      }
    }
  }
}
