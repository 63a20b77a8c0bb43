resource "google_dns_managed_zone" "public" {
  name     = "acme-zone"
  dns_name = "acme.example.com."

  dnssec_config {
    state = "on"
  }
}

resource "google_dns_record_set" "www" {
  name         = "www.${google_dns_managed_zone.public.dns_name}"
  managed_zone = google_dns_managed_zone.public.name
  type         = "A"
  ttl          = 300
  rrdatas      = ["203.0.113.10"]
}
