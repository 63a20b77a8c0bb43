provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "sb" {
  name     = "rg-sb"
  location = "westeurope"
}

resource "azurerm_servicebus_namespace" "main" {
  name                = "sb-acme"
  location            = azurerm_resource_group.sb.location
  resource_group_name = azurerm_resource_group.sb.name
  sku                 = "Standard"

  identity {
    type = "SystemAssigned"
  }
}

resource "azurerm_servicebus_queue" "orders" {
  name                                 = "orders"
  namespace_id                         = azurerm_servicebus_namespace.main.id
  max_delivery_count                   = 5
  dead_lettering_on_message_expiration = true
}

resource "azurerm_servicebus_topic" "events" {
  name         = "events"
  namespace_id = azurerm_servicebus_namespace.main.id
}
