resource "google_container_cluster" "platform" {
  name                     = "platform"
  location                 = "europe-west1"
  remove_default_node_pool = true
  initial_node_count       = 1

  private_cluster_config {
    enable_private_nodes    = true
    enable_private_endpoint = false
    master_ipv4_cidr_block  = "172.16.0.0/28"
  }

  ip_allocation_policy {}
}

resource "google_container_node_pool" "general" {
  name       = "general"
  location   = "europe-west1"
  cluster    = google_container_cluster.platform.name
  node_count = 3

  node_config {
    machine_type = "e2-standard-4"
  }
}
