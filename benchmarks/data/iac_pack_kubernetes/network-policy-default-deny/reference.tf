resource "kubernetes_network_policy_v1" "default_deny" {
  metadata {
    name      = "default-deny-ingress"
    namespace = "apps"
  }

  spec {
    policy_types = ["Ingress"]

    pod_selector {}
  }
}
