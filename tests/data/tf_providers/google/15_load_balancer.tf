resource "google_compute_health_check" "http" {
  name               = "http-hc"
  check_interval_sec = 5
  timeout_sec        = 5

  http_health_check {
    port         = 80
    request_path = "/healthz"
  }
}

resource "google_compute_backend_service" "web" {
  name          = "web-backend"
  protocol      = "HTTP"
  timeout_sec   = 30
  health_checks = [google_compute_health_check.http.id]
}

resource "google_compute_url_map" "web" {
  name            = "web-map"
  default_service = google_compute_backend_service.web.id
}

resource "google_compute_target_http_proxy" "web" {
  name    = "web-proxy"
  url_map = google_compute_url_map.web.id
}
