resource "google_compute_instance_template" "app" {
  name_prefix  = "app-"
  machine_type = "e2-small"
  tags         = ["app"]

  disk {
    source_image = "debian-cloud/debian-12"
    auto_delete  = true
    boot         = true
    disk_size_gb = 10
  }

  network_interface {
    network = "default"
  }

  scheduling {
    preemptible       = true
    automatic_restart = false
  }
}

resource "google_compute_instance_group_manager" "app" {
  name               = "app-mig"
  zone               = "us-central1-b"
  base_instance_name = "app"
  target_size        = 3

  version {
    instance_template = google_compute_instance_template.app.id
  }

  named_port {
    name = "http"
    port = 8080
  }
}
