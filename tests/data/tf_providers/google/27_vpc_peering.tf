resource "google_compute_network" "a" {
  name                    = "net-a"
  auto_create_subnetworks = false
}

resource "google_compute_network" "b" {
  name                    = "net-b"
  auto_create_subnetworks = false
}

resource "google_compute_network_peering" "a_to_b" {
  name                 = "a-to-b"
  network              = google_compute_network.a.self_link
  peer_network         = google_compute_network.b.self_link
  export_custom_routes = true
}

resource "google_compute_network_peering" "b_to_a" {
  name         = "b-to-a"
  network      = google_compute_network.b.self_link
  peer_network = google_compute_network.a.self_link
}

resource "google_compute_firewall" "a_internal" {
  name          = "a-internal"
  network       = google_compute_network.a.name
  source_ranges = ["10.0.0.0/8"]

  allow {
    protocol = "icmp"
  }
}
