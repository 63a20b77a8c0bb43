resource "kubernetes_namespace_v1" "payments" {
  metadata {
    name = "payments"
    labels = {
      team        = "payments"
      environment = "prod"
    }
  }
}
