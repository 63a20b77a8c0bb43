resource "google_compute_instance" "web" {
  name         = "web-1"
  machine_type = "e2-medium"
  zone         = "us-central1-a"
  tags         = ["web", "http-server"]

  boot_disk {
    initialize_params {
      image = "debian-cloud/debian-12"
      size  = 20
    }
  }

  network_interface {
    network = "default"
    access_config {}
  }

  metadata = {
    enable-oslogin = "TRUE"
  }
}
